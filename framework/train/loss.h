// The loss a model is trained with. It is part of the model's recipe (models/registry.h) and
// reaches the trainer through TrainerOptions::loss; the trainer takes it as given and checks the
// logits' shape against it (a clear error for a mismatch), so a new kind of model needs no edit
// in the trainer.
#pragma once

namespace loupe::train {

enum class Loss {
  // Softmax cross-entropy over the classes: logits [batch, classes >= 2], int32 class labels.
  CrossEntropy,
  // A binary classifier (Keras' Dense(1, sigmoid) with binary cross-entropy, the sigmoid fused into
  // the loss): logits [batch, 1], labels 0/1, cast to float once a step for the loss and the count.
  BinaryCrossEntropyWithLogits,
  // Regression (Keras' mean_squared_error on a linear output): outputs [batch, k >= 1], float
  // targets of batch x k values; no classes, so no accuracy (EpochStats' accuracies are NaN).
  MeanSquaredError,
};

// "cross-entropy", "binary cross-entropy with logits", "mean squared error"
const char* loss_name(Loss l);
// Whether the loss classifies, so that an epoch has an accuracy (not for mean squared error).
inline bool has_accuracy(Loss l) { return l != Loss::MeanSquaredError; }

}  // namespace loupe::train
