// loupe models: the reference models, their sizes and recipes.
#include <cstdio>

#include "core/error.h"
#include "cli/commands.h"

namespace loupe::cli {

int cmd_models(const Options&) {
  for (const auto& m : models::all_models()) {
    const auto& r = m.recipe;
    std::string sized = m.vocab > 0 && m.name != "imdb_bilstm"
                            ? " (with " + std::to_string(m.vocab) + " input ids; the data decides)"
                            : "";
    std::printf("%-14s %s\n               %lld parameters%s; recipe: %s lr %g, batch %lld, %d epochs, data: %s\n",
                m.name.c_str(), m.description.c_str(), (long long)m.expected_parameters, sized.c_str(),
                r.optimizer.c_str(), r.lr, (long long)r.batch, r.epochs, r.dataset.c_str());
  }
  return 0;
}

}  // namespace loupe::cli
