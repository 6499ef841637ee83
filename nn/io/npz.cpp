// npz = zip (nn/io/zip_archive) of npy members (nn/io/npy), written atomically (platform/file_io).
// This file holds what makes it an npz: the entry names and the member per entry.
#include "nn/io/npz.hpp"

#include <set>

#include "autograd/errors.hpp"  // fail_with: messages built as the ops build theirs
#include "platform/file_io.hpp"
#include "nn/io/npy.hpp"
#include "nn/io/untrusted_text.hpp"
#include "nn/io/zip_archive.hpp"

namespace tapegrad {

using detail::quoted;

namespace {

constexpr std::size_t kMaxNameBytes = 1024;
constexpr std::string_view kSuffix = ".npy";

std::string build_npz(const std::vector<NpzEntry>& entries, bool compress,
                      const std::string& where) {
  std::set<std::string> seen;
  for (const NpzEntry& e : entries) {
    check_npz_name(e.name, where);
    if (!seen.insert(e.name).second)
      fail_with<NpzError>(where, "entry name {} appears twice", quoted(e.name));
  }
  // libzip writes nothing at all for an archive without members.
  if (entries.empty()) fail_with<NpzError>(where, "no entries to save");
  std::vector<detail::ZipMember> members;
  members.reserve(entries.size());
  for (const NpzEntry& e : entries)
    members.push_back({e.name + std::string(kSuffix), detail::npy_bytes(e.array)});
  return detail::build_zip(members, compress, where);
}

std::vector<NpzEntry> read_npz(std::string_view bytes, const std::string& label) {
  std::vector<NpzEntry> entries;
  std::set<std::string> seen;
  const auto entry_name = [](const std::string& member) {
    return member.substr(0, member.size() - kSuffix.size());
  };
  const auto check_name = [&](const std::string& member, const std::string& mwhere) {
    if (member.size() <= kSuffix.size() ||
        std::string_view(member).substr(member.size() - kSuffix.size()) != kSuffix)
      fail_with<NpzError>(mwhere, "not an .npy member");
    const std::string name = entry_name(member);
    check_npz_name(name, mwhere);
    if (!seen.insert(name).second) fail_with<NpzError>(mwhere, "appears twice in the archive");
  };
  const auto take = [&](const std::string& member, std::string data, const std::string& mwhere) {
    entries.emplace_back(entry_name(member), detail::parse_npy(data, mwhere));
  };
  detail::read_zip(bytes, "load_npz: " + label, check_name, take);
  return entries;
}

}  // namespace

// ---------------------------------------------------------------------------------------

const char* npz_dtype_name(NpzDtype dtype) {
  switch (dtype) {
    case NpzDtype::float32: return "float32";
    case NpzDtype::float64: return "float64";
    case NpzDtype::int64: return "int64";
  }
  return "unknown";
}

namespace detail {
void throw_npz_dtype_mismatch(const std::string& name, NpzDtype wanted, NpzDtype held) {
  fail_with<NpzError>(fmt::format("npz entry {}", quoted(name)), "holds {}, not {}",
                      npz_dtype_name(held), npz_dtype_name(wanted));
}
}  // namespace detail

std::vector<std::size_t> NpzEntry::shape() const {
  return std::visit(
      [](const auto& a) { return std::vector<std::size_t>(a.shape().begin(), a.shape().end()); },
      array);
}

const NpzEntry* find_npz_entry(const std::vector<NpzEntry>& entries, std::string_view name) {
  for (const NpzEntry& e : entries)
    if (e.name == name) return &e;
  return nullptr;
}

void check_npz_name(const std::string& name, const std::string& what) {
  if (name.empty()) fail_with<NpzError>(what, "empty entry name");
  if (name.size() > kMaxNameBytes)
    fail_with<NpzError>(what, "entry name {} is longer than 1024 bytes", quoted(name));
  for (char c : name)
    if (c == '/' || c == '\\' || c == '\0')
      fail_with<NpzError>(what, "entry name {} contains '/', '\\' or NUL", quoted(name));
}

std::string save_npz_bytes(const std::vector<NpzEntry>& entries, bool compress) {
  return build_npz(entries, compress, "save_npz");
}

void save_npz(const std::string& path, const std::vector<NpzEntry>& entries, bool compress) {
  const std::string where = "save_npz: '" + path + "'";
  const std::string bytes = build_npz(entries, compress, where);
  try {
    detail::write_file_atomically(path, bytes, where);
  } catch (const IoError& e) {
    throw NpzError(e.code().value(), e.what());  // the npz layer reports through NpzError
  }
}

std::vector<NpzEntry> load_npz_bytes(std::string_view bytes, const std::string& label) {
  try {
    return read_npz(bytes, label);
  } catch (const std::bad_alloc&) {
    fail_with<NpzError>("load_npz: " + label, "out of memory while reading");
  }
}

std::vector<NpzEntry> load_npz(const std::string& path) {
  std::string bytes;
  try {
    bytes = detail::read_file_bytes(path, "load_npz: '" + path + "'");
  } catch (const IoError& e) {
    throw NpzError(e.code().value(), e.what());  // the npz layer reports through NpzError
  }
  return load_npz_bytes(bytes, "'" + path + "'");
}

}  // namespace tapegrad
