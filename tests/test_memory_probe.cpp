// available_memory() (autograd/memory): the one probe of what the process may still
// allocate, read from fake /proc and /sys trees: MemAvailable alone, cgroup v2 and v1
// limits less their usage with the droppable page cache not counted, the process's own
// cgroup and those above it, a path the mount does not have (a container), no limit, and
// nothing readable at all.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "autograd/memory.hpp"
#include "test_paths.hpp"

namespace fs = std::filesystem;
using namespace tapegrad;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::path(TAPEGRAD_BINARY_DIR) / "test_memory_probe" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

// A tree with MemAvailable of `available_mib` and a process in cgroup `own` ("0::/a/b").
fs::path fake_root(const std::string& name, double available_mib, const std::string& own) {
  const fs::path root = scratch(name);
  write(root / "proc/meminfo", "MemTotal:       16384000 kB\nMemAvailable:   " +
                                   std::to_string(long(available_mib * 1024)) +
                                   " kB\nBuffers:          1000 kB\n");
  write(root / "proc/self/cgroup", own + "\n");
  return root;
}

}  // namespace

TEST_CASE("available_memory: MemAvailable when no cgroup sets a limit", "[memory_probe]") {
  const fs::path root = fake_root("no_limit", 3000, "0::/user.slice");
  write(root / "sys/fs/cgroup/user.slice/memory.max", "max\n");
  write(root / "sys/fs/cgroup/user.slice/memory.current", "123456\n");
  const auto a = available_memory(root.string());
  REQUIRE(a);
  CHECK(a->bytes == 3000 * kMiB);
  CHECK(a->source == "MemAvailable");
}

TEST_CASE("available_memory: cgroup v2, the lowest room of the own cgroup and those above it",
          "[memory_probe]") {
  const fs::path root = fake_root("v2", 3000, "0::/outer/inner");
  const fs::path cg = root / "sys/fs/cgroup";
  // inner: 1000 MiB limit, 900 used of which 300 droppable cache: 400 MiB of room
  write(cg / "outer/inner/memory.max", std::to_string(long(1000 * kMiB)) + "\n");
  write(cg / "outer/inner/memory.current", std::to_string(long(900 * kMiB)) + "\n");
  write(cg / "outer/inner/memory.stat", "anon 100\nactive_file 5\ninactive_file " +
                                            std::to_string(long(300 * kMiB)) + "\n");
  // outer: 2000 MiB limit, 1700 used, no memory.stat: 300 MiB of room, the lowest
  write(cg / "outer/memory.max", std::to_string(long(2000 * kMiB)) + "\n");
  write(cg / "outer/memory.current", std::to_string(long(1700 * kMiB)) + "\n");
  const auto a = available_memory(root.string());
  REQUIRE(a);
  CHECK(a->bytes == 300 * kMiB);
  CHECK(a->source == "room under the cgroup's memory limit");
  // a roomier outer leaves inner's 400
  write(cg / "outer/memory.current", std::to_string(long(100 * kMiB)) + "\n");
  CHECK(available_memory(root.string())->bytes == 400 * kMiB);
  // usage over the limit is no room at all, not a negative one
  write(cg / "outer/inner/memory.current", std::to_string(long(1500 * kMiB)) + "\n");
  write(cg / "outer/inner/memory.stat", "inactive_file 0\n");
  CHECK(available_memory(root.string())->bytes == 0);
}

TEST_CASE("available_memory: cgroup v1's memory controller, and its 'no limit'", "[memory_probe]") {
  const fs::path root = fake_root("v1", 3000, "12:pids:/x\n5:cpu,memory:/job\n0::/x");
  const fs::path cg = root / "sys/fs/cgroup/memory";
  write(cg / "job/memory.limit_in_bytes", std::to_string(long(512 * kMiB)) + "\n");
  write(cg / "job/memory.usage_in_bytes", std::to_string(long(200 * kMiB)) + "\n");
  write(cg / "job/memory.stat", "cache 9\ninactive_file 7\ntotal_inactive_file " +
                                    std::to_string(long(100 * kMiB)) + "\n");
  write(cg / "memory.limit_in_bytes", "9223372036854771712\n");  // v1's "no limit"
  write(cg / "memory.usage_in_bytes", "999999999999\n");
  const auto a = available_memory(root.string());
  REQUIRE(a);
  CHECK(a->bytes == 412 * kMiB);
  CHECK(a->source == "room under the cgroup's memory limit");
}

TEST_CASE("available_memory: in a container, the mount's root is the own cgroup", "[memory_probe]") {
  // /proc/self/cgroup names the host's path, which the container's mount does not have
  const fs::path root = fake_root("container", 3000, "0::/docker/abc123");
  write(root / "sys/fs/cgroup/memory.max", std::to_string(long(256 * kMiB)) + "\n");
  write(root / "sys/fs/cgroup/memory.current", std::to_string(long(56 * kMiB)) + "\n");
  const auto a = available_memory(root.string());
  REQUIRE(a);
  CHECK(a->bytes == 200 * kMiB);
}

TEST_CASE("available_memory: nothing readable is nothing known", "[memory_probe]") {
  const fs::path root = scratch("empty");
  CHECK_FALSE(available_memory(root.string()));
  // and this machine's own files give a number
  const auto here = available_memory();
  REQUIRE(here);
  CHECK(here->bytes > 0);
}
