// Keras-style fit() over a Trainer: epochs with a progress line, validation after each, the
// loss and every metric of the model, and callbacks that checkpoint or stop early.
//
//   train::TrainConfig config;
//   config.model = myModel;                       // a ModelSpec (train/Model.h)
//   auto trainer = train::Trainer::create(config);
//   train::EarlyStopping early("val_loss", /*patience=*/2);
//   train::FitOptions options;
//   options.epochs = 20;
//   options.validation = &heldOut;
//   options.callbacks = {&early};
//   rt::Expected<train::History> history = train::fit(**trainer, data, options);
#pragma once

#include "train/Trainer.h"

#include <iosfwd>

namespace smelt::train {

/// What one epoch did.
struct EpochLogs {
  int64_t epoch = 0; // 0-based
  Metrics train;
  std::optional<Metrics> validation;
  double seconds = 0;
  /// The learning rate of the epoch's last step.
  double learningRate = 0;
  /// A value by Keras' name: "loss", a metric's name, or either with "val_" in front; NaN when
  /// there is no such value.
  double value(const std::string &name) const;
};

struct History {
  std::vector<EpochLogs> epochs;
  /// A callback ended training before the last epoch.
  bool stoppedEarly = false;
};

/// Something run after every epoch. An error it returns ends fit() with that error.
class Callback {
public:
  virtual ~Callback() = default;
  /// `stop` set to true ends training after this epoch.
  virtual rt::Status onEpochEnd(Trainer &trainer, const EpochLogs &logs, bool &stop) = 0;
};

/// Whether a smaller or a larger value of a monitored quantity is better; automatic: larger
/// for names with "acc" in them (accuracies), smaller for the rest (losses), as Keras decides.
enum class MonitorMode { automatic, min, max };

/// Saves the trainer (Trainer::save: parameters, optimizer state, progress) to `path` after
/// every epoch, or, with a `monitor` ("val_loss"), only after epochs that improved it
/// (Keras' save_best_only).
class ModelCheckpoint : public Callback {
public:
  explicit ModelCheckpoint(std::string path, std::string monitor = "",
                           MonitorMode mode = MonitorMode::automatic);
  rt::Status onEpochEnd(Trainer &trainer, const EpochLogs &logs, bool &stop) override;

private:
  std::string path_, monitor_;
  bool larger_;
  std::optional<double> best_;
};

/// Stops when `monitor` has not improved by more than `minDelta` for `patience` epochs in a
/// row; with `restoreBest`, the parameters of the best epoch are put back at the end.
class EarlyStopping : public Callback {
public:
  explicit EarlyStopping(std::string monitor = "val_loss", int64_t patience = 0,
                         double minDelta = 0, bool restoreBest = false,
                         MonitorMode mode = MonitorMode::automatic);
  rt::Status onEpochEnd(Trainer &trainer, const EpochLogs &logs, bool &stop) override;
  /// The epoch (0-based) training stopped after, or -1.
  int64_t stoppedEpoch() const { return stoppedEpoch_; }

private:
  std::string monitor_;
  int64_t patience_;
  double minDelta_;
  bool restoreBest_, larger_;
  std::optional<double> best_;
  std::vector<rt::HostTensor> bestParameters_, bestVariables_;
  int64_t wait_ = 0, stoppedEpoch_ = -1;
};

struct FitOptions {
  int64_t epochs = 1;
  /// Epochs already done (a resumed run): training runs epochs initialEpoch .. epochs - 1.
  int64_t initialEpoch = 0;
  /// Evaluated after every epoch when given ("val_loss", "val_accuracy", ...).
  const data::Dataset *validation = nullptr;
  /// Run in order after every epoch; fit() does not own them.
  std::vector<Callback *> callbacks;
  /// Progress: "Epoch 1/5" and one line per epoch (Keras' verbose=2); null prints nothing.
  std::ostream *out = nullptr;
  /// Also a step counter with the running loss, rewritten in place (a terminal's verbose=1).
  bool liveProgress = false;
};

/// Trains `trainer` on `data` for the epochs `options` asks for, evaluating `validation` after
/// each and running the callbacks; the first error (a step, a callback) ends it.
rt::Expected<History> fit(Trainer &trainer, const data::Dataset &data, const FitOptions &options);

} // namespace smelt::train
