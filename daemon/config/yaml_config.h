// A CLI11 config-file reader for YAML, so that every flag can also be set in
// the file given with --config. Keys are flag names without the leading
// dashes ("db-path", or "db_path"); two keys take maps:
//
//   prices:            # USD per million tokens
//     claude-sonnet-4-5: {input: 3, cache_write_5m: 3.75,
//                         cache_write_1h: 6, cache_read: 0.3}
//   ttl:               # seconds per provider
//     anthropic: 300
//
// A key whose CACHEWATCH_* environment variable is set is skipped, so that
// the environment outranks the file. from_config throws CLI::ConfigError on
// malformed YAML (CLI11's contract; ParseConfig catches it). Thread-compatible.
#ifndef CACHEWATCH_DAEMON_CONFIG_YAML_CONFIG_H_
#define CACHEWATCH_DAEMON_CONFIG_YAML_CONFIG_H_

#include <CLI/CLI.hpp>
#include <istream>
#include <string>
#include <vector>

namespace cachewatch {

class YamlConfig : public CLI::Config {
 public:
  std::string to_config(const CLI::App* app, bool default_also,
                        bool write_description,
                        std::string prefix) const override;
  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_CONFIG_YAML_CONFIG_H_
