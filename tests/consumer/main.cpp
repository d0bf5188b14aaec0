// Trains a two-layer net on XOR through the installed loupe; exits 0 when it has learned it.
#include <cstdio>

#include "loupe.h"

int main() {
  using namespace loupe;
  manual_seed(3);
  nn::Sequential net;
  net.add("fc1", std::make_shared<nn::Linear>(2, 16)).add("act", std::make_shared<nn::ReLU>())
     .add("fc2", std::make_shared<nn::Linear>(16, 2));
  net.to(kCPU);
  optim::Adam opt(net.arena(), 0.05);
  Tensor x = from_vector(std::vector<float>{0, 0, 0, 1, 1, 0, 1, 1}, Shape{4, 2});
  Tensor y = from_vector(std::vector<int32_t>{0, 1, 1, 0}, Shape{4});
  for (int step = 0; step < 300; ++step) {
    opt.zero_grad();
    backward(cross_entropy(net(x), y));
    opt.step();
  }
  double correct = count_correct(net(x), y).item();
  std::printf("consumer: XOR %g/4 correct through find_package(loupe)\n", correct);
  return correct == 4 ? 0 : 1;
}
