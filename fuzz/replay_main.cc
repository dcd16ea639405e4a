// Replays fuzz inputs without libFuzzer, so that the committed corpora and
// regression inputs run in every build (gcc included) as ordinary tests.
//
// Usage: <target>_replay PATH...
// Runs the target's LLVMFuzzerTestOneInput once on each file named, and on
// each regular file in each directory named (not recursively; names starting
// with '.' are skipped), in sorted order. Exits 0 when every input ran, 2 when
// a path is missing or a file cannot be read; an input that violates one of
// the target's invariants aborts the process.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

// Appends the inputs `path` names to `inputs`; false if it names nothing or
// cannot be listed.
bool CollectInputs(const fs::path& path, std::vector<fs::path>* inputs) {
  std::error_code error;
  if (fs::is_regular_file(path, error)) {
    inputs->push_back(path);
    return true;
  }
  if (!fs::is_directory(path, error)) return false;
  fs::directory_iterator directory(path, error);
  if (error) return false;
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : directory) {
    if (!entry.is_regular_file(error)) continue;
    if (entry.path().filename().string().starts_with(".")) continue;
    files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  inputs->insert(inputs->end(), files.begin(), files.end());
  return true;
}

// Runs the target on the contents of `file`; false if it cannot be read.
bool Replay(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return false;
  const std::string bytes((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  if (in.bad()) return false;
  std::cerr << "replay: " << file.string() << " (" << bytes.size()
            << " bytes)\n";
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()),
                         bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: " << argv[0] << " FILE_OR_DIRECTORY...\n";
    return 2;
  }
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    if (!CollectInputs(argv[i], &inputs)) {
      std::cerr << "replay: no such file or directory: " << argv[i] << "\n";
      return 2;
    }
  }
  for (const fs::path& file : inputs) {
    if (!Replay(file)) {
      std::cerr << "replay: cannot read " << file.string() << "\n";
      return 2;
    }
  }
  std::cerr << "replay: " << inputs.size() << " inputs ran\n";
  return 0;
}
