#include "daemon/config/yaml_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace cachewatch {
namespace {

std::string FlagName(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  return key;
}

// The environment outranks the file: CLI11 would apply the file first.
bool SetInEnvironment(const std::string& flag) {
  std::string name = "CACHEWATCH_" + flag;
  for (char& c : name) c = c == '-' ? '_' : std::toupper(c);
  return std::getenv(name.c_str()) != nullptr;
}

CLI::ConfigItem Item(std::string name, std::vector<std::string> inputs) {
  CLI::ConfigItem item;
  item.name = std::move(name);
  item.inputs = std::move(inputs);
  return item;
}

std::string Scalar(const YAML::Node& node, const std::string& where) {
  if (!node.IsScalar()) throw CLI::ConfigError(where + ": expected a value");
  return node.Scalar();
}

// prices: {model: {input, cache_write_5m, cache_write_1h, cache_read}}
// becomes --price model=input,write5m,write1h,read.
CLI::ConfigItem Prices(const YAML::Node& prices) {
  if (!prices.IsMap()) throw CLI::ConfigError("prices: expected a map");
  std::vector<std::string> inputs;
  for (const auto& entry : prices) {
    const std::string model = Scalar(entry.first, "prices");
    const YAML::Node& price = entry.second;
    if (!price.IsMap()) {
      throw CLI::ConfigError("prices." + model + ": expected a map");
    }
    std::string value = model + "=";
    const char* fields[] = {"input", "cache_write_5m", "cache_write_1h",
                            "cache_read"};
    for (const char* field : fields) {
      if (!price[field]) {
        throw CLI::ConfigError("prices." + model + "." + field + ": required");
      }
      if (field != fields[0]) value += ",";
      value += Scalar(price[field], "prices." + model + "." + field);
    }
    inputs.push_back(value);
  }
  return Item("price", inputs);
}

// ttl: {provider: seconds} becomes --ttl provider=seconds.
CLI::ConfigItem Ttls(const YAML::Node& ttls) {
  if (!ttls.IsMap()) throw CLI::ConfigError("ttl: expected a map");
  std::vector<std::string> inputs;
  for (const auto& entry : ttls) {
    const std::string provider = Scalar(entry.first, "ttl");
    inputs.push_back(provider + "=" + Scalar(entry.second, "ttl." + provider));
  }
  return Item("ttl", inputs);
}

}  // namespace

std::string YamlConfig::to_config(const CLI::App* app, bool default_also,
                                  bool /*write_description*/,
                                  std::string /*prefix*/) const {
  YAML::Emitter out;
  out << YAML::BeginMap;
  for (const CLI::Option* option : app->get_options()) {
    if (option->get_lnames().empty() || !option->get_configurable()) continue;
    const std::string value =
        option->count() > 0 ? option->as<std::string>()
                            : (default_also ? option->get_default_str() : "");
    if (value.empty()) continue;
    out << YAML::Key << option->get_lnames().front() << YAML::Value << value;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::vector<CLI::ConfigItem> YamlConfig::from_config(
    std::istream& input) const {
  YAML::Node root;
  try {
    root = YAML::Load(input);
  } catch (const YAML::Exception& error) {
    throw CLI::ConfigError(std::string("config file: ") + error.what());
  }
  std::vector<CLI::ConfigItem> items;
  if (root.IsNull()) return items;
  if (!root.IsMap()) throw CLI::ConfigError("config file: expected a map");
  for (const auto& entry : root) {
    const std::string key = FlagName(Scalar(entry.first, "config file"));
    const YAML::Node& value = entry.second;
    if (SetInEnvironment(key == "prices" ? "price" : key)) continue;
    if (key == "prices") {
      items.push_back(Prices(value));
    } else if (key == "ttl") {
      items.push_back(Ttls(value));
    } else if (value.IsSequence()) {
      std::vector<std::string> inputs;
      for (const auto& element : value) inputs.push_back(Scalar(element, key));
      items.push_back(Item(key, inputs));
    } else {
      items.push_back(Item(key, {Scalar(value, key)}));
    }
  }
  return items;
}

}  // namespace cachewatch
