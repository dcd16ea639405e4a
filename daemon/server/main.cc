// cachewatchd: parses the configuration and runs the server.
#include <cstdio>
#include <variant>

#include "daemon/config/config.h"
#include "daemon/server/server.h"

#ifndef CACHEWATCH_VERSION
#define CACHEWATCH_VERSION "0.0.0"
#endif

int main(int argc, char** argv) {
  auto parsed = cachewatch::ParseConfig(argc, argv, CACHEWATCH_VERSION);
  if (const auto* exit = std::get_if<cachewatch::ConfigExit>(&parsed)) {
    std::fputs(exit->message.c_str(), exit->exit_code == 0 ? stdout : stderr);
    return exit->exit_code;
  }
  return cachewatch::RunServer(std::get<cachewatch::Config>(parsed),
                               CACHEWATCH_VERSION);
}
