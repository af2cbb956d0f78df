// The learning-rate schedules' formulas and their command-line spelling.
#include "frontend/Schedules.h"

#include <cmath>
#include <sstream>
#include <vector>

namespace smelt {

double LearningRateSchedule::at(double base, int64_t step) const {
  double s = double(step < 0 ? 0 : step);
  switch (kind) {
  case Kind::constant:
    return base;
  case Kind::step:
    return base * std::pow(factor, std::floor(s / double(every)));
  case Kind::exponential:
    return base * std::pow(factor, s / double(every));
  case Kind::warmupCosine: {
    if (s < double(warmupSteps))
      return base * (s + 1) / double(warmupSteps);
    double span = double(totalSteps - warmupSteps);
    double progress = span > 0 ? std::min(1.0, (s - double(warmupSteps)) / span) : 1.0;
    double cosine = 0.5 * (1 + std::cos(M_PI * progress));
    return base * (finalFraction + (1 - finalFraction) * cosine);
  }
  }
  return base;
}

std::string LearningRateSchedule::check() const {
  switch (kind) {
  case Kind::constant:
    return "";
  case Kind::step:
  case Kind::exponential:
    if (every < 1)
      return "a decay interval of at least 1 step";
    if (!(factor > 0 && factor <= 1))
      return "a decay factor in (0, 1]";
    return "";
  case Kind::warmupCosine:
    if (warmupSteps < 0 || totalSteps < warmupSteps)
      return "0 <= warm-up steps <= total steps";
    if (!(finalFraction >= 0 && finalFraction <= 1))
      return "a final fraction in [0, 1]";
    return "";
  }
  return "";
}

std::optional<LearningRateSchedule> LearningRateSchedule::parse(const std::string &text) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  for (std::string part; std::getline(stream, part, ':');)
    parts.push_back(part);
  auto number = [](const std::string &s, double &out) {
    char *end = nullptr;
    out = std::strtod(s.c_str(), &end);
    return !s.empty() && end == s.c_str() + s.size() && std::isfinite(out);
  };
  auto count = [&](const std::string &s, int64_t &out) {
    double v;
    if (!number(s, v) || v != std::floor(v) || std::fabs(v) > 1e15)
      return false;
    out = int64_t(v);
    return true;
  };
  LearningRateSchedule schedule;
  if (parts.empty())
    return std::nullopt;
  const std::string &name = parts[0];
  bool ok = false;
  if (name == "constant") {
    ok = parts.size() == 1;
  } else if (name == "step" || name == "exponential") {
    schedule.kind = name == "step" ? Kind::step : Kind::exponential;
    ok = parts.size() == 3 && count(parts[1], schedule.every) && number(parts[2], schedule.factor);
  } else if (name == "cosine") {
    schedule.kind = Kind::warmupCosine;
    ok = (parts.size() == 3 || parts.size() == 4) && count(parts[1], schedule.warmupSteps) &&
         count(parts[2], schedule.totalSteps) &&
         (parts.size() == 3 || number(parts[3], schedule.finalFraction));
  }
  if (!ok || !schedule.check().empty())
    return std::nullopt;
  return schedule;
}

} // namespace smelt
