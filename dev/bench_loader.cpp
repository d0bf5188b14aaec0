// The loader against the resident path in one process: epochs alternate between the two, so
// the machine's drift affects both alike. Prints each path's median samples/s and the ratio.
// usage: bench_loader DATA_DIR [batch 128] [rounds 8] [workers 4] [prefetch 4] [pin 1]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/cuda_runtime.h"
#include "data/idx.h"
#include "loader/loader.h"
#include "models/session.h"
#include "ops/view.h"
#include "train/trainer.h"

using namespace loupe;

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_loader DATA_DIR [batch] [rounds] [workers] [prefetch] [pin]\n");
    return 2;
  }
  int64_t batch = argc > 2 ? std::atoll(argv[2]) : 128;
  int rounds = argc > 3 ? std::atoi(argv[3]) : 8;
  Device dev = cuda_available() ? kCUDA : kCPU;
  data::MnistData m = data::load_mnist(argv[1]);
  train::TensorDataset resident{from_vector(m.train_images, Shape{m.n_train, 28, 28}),
                                from_vector(m.train_labels, Shape{m.n_train})};
  resident = resident.to(dev);
  loader::LoaderOptions lo;
  lo.batch = batch;
  lo.workers = argc > 4 ? std::atoi(argv[4]) : 4;
  lo.prefetch = argc > 5 ? std::atoi(argv[5]) : 4;
  lo.pin_memory = argc > 6 ? std::atoi(argv[6]) != 0 : true;
  lo.device = dev;
  loader::DataLoader dl(std::make_shared<loader::ArrayDataset>(m.train_images, m.train_labels, Shape{28, 28}), lo);
  models::SessionOptions so;
  so.device = dev;
  models::Session session(models::find_model("mnist_mlp"), so);
  train::Trainer& t = session.trainer();
  std::vector<double> res, lod;
  for (int r = 0; r <= rounds; ++r) {  // round 0 warms both paths up
    double a = t.train_epoch(resident, batch, 1, r + 1).samples_per_sec();
    double b = t.train_epoch(dl, r + 1).samples_per_sec();
    if (r == 0) continue;
    res.push_back(a);
    lod.push_back(b);
    std::printf("round %d: resident %.0f  loader %.0f samples/s\n", r, a, b);
  }
  double mr = median(res), ml = median(lod);
  double n = double(resident.size());
  std::printf("batch %lld, %d workers, prefetch %d, %s: resident median %.0f samples/s (epoch %.4f s), loader median "
              "%.0f (epoch %.4f s), ratio %.3f\n",
              (long long)batch, lo.workers, lo.prefetch, lo.pin_memory ? "pinned" : "pageable", mr, n / mr, ml, n / ml,
              ml / mr);
  return 0;
}
