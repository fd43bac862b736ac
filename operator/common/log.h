#pragma once

// The log lines of the long-running subcommands (operator, guard), on
// stderr: the level and format --log-level and --log-format choose, and the
// fields of the reconcile a line belongs to, named as controller-runtime's
// structured logs name them (docs/operator.md, "Logs").

#include <chrono>
#include <string>
#include <string_view>

#include "operator/common/status.h"

namespace allocguard::log {

enum class Format { kText, kJson };

// Parses --log-level (debug, info, warn, error) and --log-format (text,
// json) and installs them on spdlog's default logger. The error names the
// flag and the values it takes; nothing changes then.
Status Configure(const std::string& level, const std::string& format);

// The reconcile the calling thread is in: every line it logs until the
// scope ends carries controller, object (namespace/name, or name), and a
// reconcileID new to this reconcile. Scopes nest; the inner one wins.
class ReconcileScope {
 public:
  ReconcileScope(std::string controller, std::string object);
  ~ReconcileScope();
  ReconcileScope(const ReconcileScope&) = delete;
  ReconcileScope& operator=(const ReconcileScope&) = delete;

  const std::string& reconcile_id() const { return reconcile_id_; }

 private:
  std::string controller_;
  std::string object_;
  std::string reconcile_id_;
  const ReconcileScope* outer_;
  friend struct ScopeAccess;
};

// A random UUID (version 4), as controller-runtime's reconcileID.
std::string NewReconcileId();

// One line as the formatter writes it (without the newline), for the tests
// and for what else must log the same way: level "debug", "info", "warn",
// "error"; the calling thread's ReconcileScope adds its fields.
std::string FormatLine(Format format, std::chrono::system_clock::time_point time,
                       std::string_view level, std::string_view message);

}  // namespace allocguard::log
