#include "train/observer.h"

#include <utility>

namespace loupe::train {

void Control::stop(const std::string& why) {
  if (!stop_.load()) why_ = why;
  stop_.store(true);
}

void Control::set_lr(double lr, const std::string& why) {
  lr_ = LrChange{lr, why};
}

void Control::save(const std::string& path) { saves_.push_back(path); }
void Control::keep_weights() { keep_ = true; }
void Control::restore_weights() { restore_ = true; }

std::optional<Control::LrChange> Control::take_lr() { return std::exchange(lr_, std::nullopt); }
std::vector<std::string> Control::take_saves() { return std::exchange(saves_, {}); }
bool Control::take_keep() { return std::exchange(keep_, false); }
std::vector<std::string> Control::take_notes() { return std::exchange(notes_, {}); }

}  // namespace loupe::train
