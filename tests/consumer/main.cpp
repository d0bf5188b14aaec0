// A model written here in C++, trained through loupe's run with the report `loupe train` prints:
// every epoch's throughput, time split, utilisation and advice. Fashion-MNIST where it is installed
// (or --synthetic: learnable random images); on the GPU when there is one.
#include <cstdio>
#include <memory>
#include <string>

#include "loupe.h"

int main(int argc, char** argv) {
  using namespace loupe;
  models::ModelInfo model;
  model.name = "my_mlp";
  model.description = "MLP 784-256-10 written in C++";
  model.recipe.optimizer = "adam";
  model.recipe.lr = 1e-3;
  model.recipe.batch = 128;
  model.recipe.epochs = 3;
  model.recipe.dataset = "mnist";  // MNIST-format images and labels (run/data.h)
  model.build_for = [](int64_t) {
    auto net = std::make_shared<nn::Sequential>();
    net->add("flatten", std::make_shared<nn::Flatten>())
        .add("fc1", std::make_shared<nn::Linear>(784, 256))
        .add("relu", std::make_shared<nn::ReLU>())
        .add("fc2", std::make_shared<nn::Linear>(256, 10));
    return net;
  };
  run::RunConfig config;
  config.model = model;
  config.data = run::request_for(model);
  if (argc > 1 && std::string(argv[1]) == "--synthetic") {
    config.data.synthetic = true;
    config.data.synthetic_kind = data::SyntheticKind::Learnable;
  }
  config.device = cuda_available() ? kCUDA : kCPU;
  config.max_steps = 100;  // a quick look: 100 steps per epoch
  run::Run run(config);
  run.add(std::make_shared<run::ReportPrinter>());  // the header and each epoch's lines on stdout
  run.add(std::make_shared<run::EarlyStopping>(run::parse_early_stop("2")));
  const run::RunResult r = run.run();
  std::printf("consumer: test accuracy %.2f%% after %d epochs\n", 100 * r.last, r.epochs_done);
  return r.end == run::RunResult::End::Finished && r.last > 0.5 ? 0 : 1;
}
