#include "operator/admission/library_layout.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace allocguard::admission {
namespace {

namespace fs = std::filesystem;

// glibc's $LIB for this architecture on multiarch distributions (Debian,
// Ubuntu). The image's libraries are built for the same architecture.
#if defined(__x86_64__)
constexpr char kMultiarchTuple[] = "x86_64-linux-gnu";
#elif defined(__aarch64__)
constexpr char kMultiarchTuple[] = "aarch64-linux-gnu";
#else
#error "allocguard's library layout knows x86_64 and aarch64"
#endif

// The name musl's loader sees literally (it does not expand tokens).
constexpr char kLiteralLibToken[] = "$LIB";

Status Errno(const std::string& what, int err) {
  return Internal(what + ": " + std::strerror(err));
}

// Copies `src` to `dst` through a temporary file renamed into place, mode 0644.
Status CopyFile(const fs::path& src, const fs::path& dst) {
  const fs::path tmp = dst.string() + ".tmp";
  int in = open(src.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return Errno("cannot open " + src.string(), errno);
  int out = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) {
    int err = errno;
    close(in);
    return Errno("cannot create " + tmp.string(), err);
  }
  char buffer[1 << 16];
  Status status = Status::Ok();
  for (;;) {
    ssize_t n = read(in, buffer, sizeof buffer);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      status = Errno("cannot read " + src.string(), errno);
      break;
    }
    for (ssize_t done = 0; done < n;) {
      ssize_t w = write(out, buffer + done, static_cast<size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        status = Errno("cannot write " + tmp.string(), errno);
        break;
      }
      done += w;
    }
    if (!status.ok()) break;
  }
  close(in);
  if (status.ok() && fsync(out) != 0) status = Errno("cannot sync " + tmp.string(), errno);
  if (close(out) != 0 && status.ok()) status = Errno("cannot close " + tmp.string(), errno);
  if (status.ok() && rename(tmp.c_str(), dst.c_str()) != 0) {
    status = Errno("cannot rename " + tmp.string() + " to " + dst.string(), errno);
  }
  if (!status.ok()) unlink(tmp.c_str());
  return status;
}

// Makes `link` a symbolic link to `target` (relative), replacing what is there.
Status Link(const std::string& target, const fs::path& link) {
  const fs::path tmp = link.string() + ".tmp";
  unlink(tmp.c_str());
  if (symlink(target.c_str(), tmp.c_str()) != 0) {
    return Errno("cannot link " + tmp.string() + " to " + target, errno);
  }
  if (rename(tmp.c_str(), link.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    return Errno("cannot rename " + tmp.string() + " to " + link.string(), err);
  }
  return Status::Ok();
}

Status MakeDirectories(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Internal("cannot create " + dir.string() + ": " + ec.message());
  return Status::Ok();
}

// "../../glibc/<lib>" for an alias directory `depth` levels below the mount.
std::string UpTo(const std::string& dir, const std::string& rest) {
  std::string up;
  for (char c : dir + "/") {
    if (c == '/') up += "../";
  }
  return up + rest;
}

bool IsRegularFile(const fs::path& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

std::string LibcDirectory(api::Libc libc) {
  switch (libc) {
    case api::Libc::kGlibc:
      return "glibc";
    case api::Libc::kMusl:
      return "musl";
    case api::Libc::kAuto:
      break;
  }
  return "";
}

std::vector<std::string> GlibcLibDirectories() {
  return {std::string("lib/") + kMultiarchTuple, "lib64", "lib"};
}

std::string PreloadPath(const std::string& mount, api::Libc libc, const std::string& library) {
  const std::string dir = libc == api::Libc::kAuto ? kLiteralLibToken : LibcDirectory(libc);
  return mount + "/" + dir + "/" + library;
}

Status InstallAllocatorLibrary(const std::string& from, const std::string& to,
                               const std::string& library, std::vector<std::string>* installed) {
  if (library.empty() || library.find('/') != std::string::npos || library[0] == '.') {
    return InvalidArgument("library must be a file name, got \"" + library + "\"");
  }
  auto note = [&](std::string line) {
    if (installed != nullptr) installed->push_back(std::move(line));
  };
  const fs::path source = fs::path(from);
  const fs::path dest = fs::path(to);
  const std::string glibc = LibcDirectory(api::Libc::kGlibc);
  const std::string musl = LibcDirectory(api::Libc::kMusl);
  if (!IsRegularFile(source / glibc / library)) {
    return NotFound((source / glibc / library).string() +
                    " is missing: the allocguard image carries no glibc build of " + library);
  }
  for (const std::string& libc : {glibc, musl}) {
    const fs::path src = source / libc / library;
    if (!IsRegularFile(src)) continue;
    AG_RETURN_IF_ERROR(MakeDirectories(dest / libc));
    AG_RETURN_IF_ERROR(CopyFile(src, dest / libc / library));
    note((dest / libc / library).string() + " (copied from " + src.string() + ")");
  }
  const std::string glibc_library = glibc + "/" + library;
  for (const std::string& dir : GlibcLibDirectories()) {
    AG_RETURN_IF_ERROR(MakeDirectories(dest / dir));
    const std::string target = UpTo(dir, glibc_library);
    AG_RETURN_IF_ERROR(Link(target, dest / dir / library));
    note((dest / dir / library).string().append(" -> ").append(target));
  }
  if (IsRegularFile(dest / musl / library)) {
    AG_RETURN_IF_ERROR(MakeDirectories(dest / kLiteralLibToken));
    const std::string target = UpTo(kLiteralLibToken, musl + "/" + library);
    AG_RETURN_IF_ERROR(Link(target, dest / kLiteralLibToken / library));
    note((dest / kLiteralLibToken / library).string() + " -> " + target);
  }
  return Status::Ok();
}

}  // namespace allocguard::admission
