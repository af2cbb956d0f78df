// fit(): the epoch loop with its progress lines, validation and callbacks.
#include "train/Fit.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <ostream>

namespace smelt::train {

namespace {
bool largerIsBetter(const std::string &monitor, MonitorMode mode) {
  if (mode != MonitorMode::automatic)
    return mode == MonitorMode::max;
  return monitor.find("acc") != std::string::npos;
}

/// " - loss: 0.5213 - accuracy: 0.8123", each name after `prefix`.
std::string metricsText(const Metrics &m, const std::string &prefix) {
  std::string text = fmt::format(" - {}loss: {:.4f}", prefix, m.loss);
  for (const auto &[name, value] : m.values)
    text += fmt::format(" - {}{}: {:.4f}", prefix, name, value);
  return text;
}

/// The monitored value of `logs`, or an error naming the values there are.
rt::Expected<double> monitored(const EpochLogs &logs, const std::string &monitor) {
  double v = logs.value(monitor);
  if (!std::isnan(v) || monitor == "loss" || monitor == "val_loss")
    return v;
  std::string known = "loss";
  for (const auto &[name, value] : logs.train.values)
    known += ", " + name;
  if (logs.validation)
    known += ", val_loss and val_ of each";
  return rt::Status::error("cannot monitor '" + monitor + "': the logs have " + known);
}

/// Whether `value` improves on `best` by more than `minDelta`.
bool improves(double value, const std::optional<double> &best, bool larger, double minDelta) {
  if (std::isnan(value))
    return false;
  if (!best)
    return true;
  return larger ? value > *best + minDelta : value < *best - minDelta;
}
} // namespace

double EpochLogs::value(const std::string &name) const {
  const Metrics *from = &train;
  std::string key = name;
  if (name.rfind("val_", 0) == 0) {
    if (!validation)
      return std::numeric_limits<double>::quiet_NaN();
    from = &*validation;
    key = name.substr(4);
  }
  return key == "loss" ? from->loss : from->value(key);
}

ModelCheckpoint::ModelCheckpoint(std::string path, std::string monitor, MonitorMode mode)
    : path_(std::move(path)), monitor_(std::move(monitor)),
      larger_(largerIsBetter(monitor_, mode)) {}

rt::Status ModelCheckpoint::onEpochEnd(Trainer &trainer, const EpochLogs &logs, bool &) {
  if (!monitor_.empty()) {
    rt::Expected<double> value = monitored(logs, monitor_);
    if (!value)
      return value.status();
    if (!improves(*value, best_, larger_, 0))
      return rt::Status();
    best_ = *value;
  }
  return trainer.save(path_, logs.epoch + 1);
}

EarlyStopping::EarlyStopping(std::string monitor, int64_t patience, double minDelta,
                             bool restoreBest, MonitorMode mode)
    : monitor_(std::move(monitor)), patience_(patience), minDelta_(std::fabs(minDelta)),
      restoreBest_(restoreBest), larger_(largerIsBetter(monitor_, mode)) {}

rt::Status EarlyStopping::onEpochEnd(Trainer &trainer, const EpochLogs &logs, bool &stop) {
  rt::Expected<double> value = monitored(logs, monitor_);
  if (!value)
    return value.status();
  if (improves(*value, best_, larger_, minDelta_)) {
    best_ = *value;
    wait_ = 0;
    if (restoreBest_) {
      bestParameters_ = trainer.parameters();
      bestVariables_ = trainer.variables();
    }
    return rt::Status();
  }
  if (++wait_ <= patience_)
    return rt::Status();
  stop = true;
  stoppedEpoch_ = logs.epoch;
  if (restoreBest_ && !bestParameters_.empty()) {
    if (rt::Status s = trainer.setParameters(bestParameters_); !s.ok())
      return s;
    return trainer.setVariables(bestVariables_);
  }
  return rt::Status();
}

rt::Expected<History> fit(Trainer &trainer, const data::Dataset &data,
                          const FitOptions &options) {
  using Clock = std::chrono::steady_clock;
  if (options.epochs < 0 || options.initialEpoch < 0)
    return rt::Status::error(fmt::format("fit: epochs ({}) and initialEpoch ({}) must be >= 0",
                                         options.epochs, options.initialEpoch));
  History history;
  std::ostream *out = options.out;
  bool mixedF16 = trainer.config().precision == PrecisionPolicy::mixed_f16;
  bool scheduled =
      trainer.config().optimizer.schedule.kind != LearningRateSchedule::Kind::constant;
  for (int64_t epoch = options.initialEpoch; epoch < options.epochs; ++epoch) {
    if (out)
      *out << "Epoch " << epoch + 1 << "/" << options.epochs << std::endl;
    auto start = Clock::now();
    std::function<void(int64_t, int64_t, const Metrics &)> live;
    if (out && options.liveProgress)
      live = [&](int64_t step, int64_t steps, const Metrics &m) {
        *out << fmt::format("\r{}/{}{}", step, steps, metricsText(m, ""))
             << (step == steps ? "\r" : "") << std::flush;
      };
    rt::Expected<Metrics> metrics = trainer.trainEpoch(data, epoch, live);
    if (!metrics)
      return metrics.status();
    EpochLogs logs;
    logs.epoch = epoch;
    logs.train = std::move(*metrics);
    logs.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    logs.learningRate = trainer.config().optimizer.schedule.at(
        trainer.config().optimizer.learningRate, trainer.globalStep() - 1);
    if (options.validation) {
      rt::Expected<Metrics> val = trainer.evaluate(*options.validation);
      if (!val)
        return val.status();
      logs.validation = std::move(*val);
    }
    if (out) {
      int64_t steps = logs.train.steps;
      std::string line = fmt::format("{}/{} - {:.1f}s{}", steps, steps, logs.seconds,
                                     metricsText(logs.train, ""));
      if (logs.validation)
        line += metricsText(*logs.validation, "val_");
      // Skipped steps are shown, never silent: users of other frameworks miss them.
      if (mixedF16)
        line += fmt::format(" - skipped: {} - loss_scale: {:g}", logs.train.skippedSteps,
                            logs.train.lossScale);
      if (scheduled)
        line += fmt::format(" - lr: {:.3g}", logs.learningRate);
      line += fmt::format(" - {:.0f} examples/s", double(logs.train.examples) / logs.seconds);
      if (logs.train.droppedExamples)
        line += fmt::format(" ({} example{} of the last batch not trained: {})",
                            logs.train.droppedExamples,
                            logs.train.droppedExamples == 1 ? "" : "s",
                            trainer.config().dropRemainder
                                ? std::string("dropRemainder")
                                : fmt::format("the rest of the batch splits over {} replicas",
                                              trainer.config().replicas));
      *out << line << std::endl;
    }
    bool stop = false;
    for (Callback *callback : options.callbacks)
      if (rt::Status s = callback->onEpochEnd(trainer, logs, stop); !s.ok())
        return s;
    history.epochs.push_back(std::move(logs));
    if (stop) {
      history.stoppedEarly = epoch + 1 < options.epochs;
      break;
    }
  }
  return history;
}

} // namespace smelt::train
