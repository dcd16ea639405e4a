// Test helpers: a registry's text exposition parsed into samples, so tests
// can assert exact values. For tests only.
#ifndef CACHEWATCH_DAEMON_TELEMETRY_TEST_SCRAPE_H_
#define CACHEWATCH_DAEMON_TELEMETRY_TEST_SCRAPE_H_

#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cachewatch::testing {

using LabelMap = std::map<std::string, std::string>;

struct Sample {
  std::string name;
  LabelMap labels;
  double value = 0;
};

// Parses Prometheus text exposition: every sample line, comments skipped.
inline std::vector<Sample> ParseExposition(std::string_view text) {
  std::vector<Sample> samples;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    if (line.empty() || line.front() == '#') continue;
    Sample sample;
    const size_t name_end = line.find_first_of("{ ");
    sample.name = std::string(line.substr(0, name_end));
    size_t pos = name_end;
    if (line[pos] == '{') {
      ++pos;
      while (line[pos] != '}') {
        const size_t eq = line.find('=', pos);
        std::string key(line.substr(pos, eq - pos));
        std::string value;
        pos = eq + 2;  // Past ="
        for (; line[pos] != '"'; ++pos) {
          if (line[pos] == '\\') {
            ++pos;
            value.push_back(line[pos] == 'n' ? '\n' : line[pos]);
          } else {
            value.push_back(line[pos]);
          }
        }
        ++pos;  // Past the closing quote.
        if (line[pos] == ',') ++pos;
        sample.labels.emplace(std::move(key), std::move(value));
      }
      ++pos;  // Past }.
    }
    sample.value = std::stod(std::string(line.substr(pos + 1)));
    samples.push_back(std::move(sample));
  }
  return samples;
}

inline std::vector<Sample> Scrape(prometheus::Registry& registry) {
  return ParseExposition(
      prometheus::TextSerializer().Serialize(registry.Collect()));
}

// The value of the sample with exactly this name and these labels.
inline std::optional<double> Find(const std::vector<Sample>& samples,
                                  std::string_view name,
                                  const LabelMap& labels = {}) {
  for (const Sample& sample : samples) {
    if (sample.name == name && sample.labels == labels) return sample.value;
  }
  return std::nullopt;
}

// The samples with this name.
inline std::vector<Sample> Named(const std::vector<Sample>& samples,
                                 std::string_view name) {
  std::vector<Sample> named;
  for (const Sample& sample : samples) {
    if (sample.name == name) named.push_back(sample);
  }
  return named;
}

}  // namespace cachewatch::testing

#endif  // CACHEWATCH_DAEMON_TELEMETRY_TEST_SCRAPE_H_
