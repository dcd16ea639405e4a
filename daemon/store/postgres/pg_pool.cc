#include "daemon/store/postgres/pg_pool.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace cachewatch {
namespace {

constexpr std::chrono::milliseconds kFirstBackoff{100};
constexpr std::chrono::milliseconds kMaxBackoff{1000};

}  // namespace

PgPool::Lease::~Lease() {
  if (pool_ != nullptr) pool_->Release(std::move(connection_));
}

PgPool::PgPool(std::string conninfo, size_t size,
               std::chrono::milliseconds timeout,
               std::function<absl::Status(PgConnection&)> setup)
    : conninfo_(std::move(conninfo)),
      size_(std::max<size_t>(1, size)),
      timeout_(timeout),
      setup_(std::move(setup)) {
  idle_.resize(size_);
}

absl::StatusOr<PgPool::Lease> PgPool::Acquire() {
  return Acquire(/*honor_backoff=*/true);
}

absl::StatusOr<PgPool::Lease> PgPool::AcquireNow() {
  return Acquire(/*honor_backoff=*/false);
}

absl::StatusOr<PgPool::Lease> PgPool::Acquire(bool honor_backoff) {
  std::unique_ptr<PgConnection> connection;
  {
    std::unique_lock<std::mutex> lock(mu_);
    released_.wait(lock, [this] { return !idle_.empty(); });
    // Prefer a live connection over an empty slot.
    auto live = std::find_if(idle_.begin(), idle_.end(),
                             [](const auto& c) { return c != nullptr; });
    if (live == idle_.end()) live = idle_.begin();
    connection = std::move(*live);
    idle_.erase(live);
    if (connection != nullptr && !connection->ok()) connection.reset();
    if (connection == nullptr && honor_backoff &&
        std::chrono::steady_clock::now() < next_attempt_) {
      idle_.push_back(nullptr);
      released_.notify_one();
      return absl::UnavailableError(absl::StrCat(
          "PostgreSQL unreachable (retrying): ", last_error_.message()));
    }
  }
  if (connection == nullptr) {
    absl::StatusOr<std::unique_ptr<PgConnection>> connected =
        PgConnection::Connect(conninfo_, timeout_);
    absl::Status status = connected.status();
    if (connected.ok() && setup_) status = setup_(**connected);
    std::lock_guard<std::mutex> lock(mu_);
    if (!status.ok()) {
      backoff_ = backoff_.count() == 0 ? kFirstBackoff
                                       : std::min(kMaxBackoff, backoff_ * 2);
      next_attempt_ = std::chrono::steady_clock::now() + backoff_;
      // A copy of its own: the status returned below is not shared with
      // the pool (absl::Status reps shared across threads are what TSan
      // reports on, freed by one caller while another copies it).
      last_error_ = absl::Status(status.code(), status.message());
      idle_.push_back(nullptr);
      released_.notify_one();
      return status.code() == absl::StatusCode::kUnavailable
                 ? status
                 : absl::UnavailableError(status.message());
    }
    backoff_ = std::chrono::milliseconds(0);
    next_attempt_ = {};
    last_error_ = absl::OkStatus();
    connection = *std::move(connected);
  }
  return Lease(this, std::move(connection));
}

bool PgPool::backing_off() const {
  std::lock_guard<std::mutex> lock(mu_);
  return backoff_.count() > 0;
}

void PgPool::Release(std::unique_ptr<PgConnection> connection) {
  std::lock_guard<std::mutex> lock(mu_);
  if (connection != nullptr && !connection->ok()) connection.reset();
  idle_.push_back(std::move(connection));
  released_.notify_one();
}

}  // namespace cachewatch
