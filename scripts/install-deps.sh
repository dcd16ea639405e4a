#!/usr/bin/env bash
# Installs every Debian 12 package that cachewatch's build, tests and tools need.
# Idempotent: packages already present are left as they are. Run as root.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git ca-certificates
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler grpc-proto
  libxxhash-dev libsqlite3-dev sqlite3 libgoogle-perftools-dev
  libpq-dev postgresql-15
  prometheus-cpp-dev libcurl4-openssl-dev zlib1g-dev libboost-dev libssl-dev
  nlohmann-json3-dev libsimdjson-dev libcli11-dev libyaml-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev lld ninja-build
  clang libclang-rt-14-dev
  prometheus curl openssl clang-format python3 nodejs
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: missing packages: ${missing[*]}; run as root" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
