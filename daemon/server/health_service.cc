#include "daemon/server/health_service.h"

#include <optional>

namespace cachewatch {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

HealthService::HealthService()
    : statuses_{{"", HealthCheckResponse::SERVING}} {}

void HealthService::SetServingStatus(const std::string& service, bool serving) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shut_down_) return;
    statuses_[service] = serving ? HealthCheckResponse::SERVING
                                 : HealthCheckResponse::NOT_SERVING;
  }
  changed_.notify_all();
}

void HealthService::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shut_down_ = true;
    for (auto& [service, status] : statuses_) {
      status = HealthCheckResponse::NOT_SERVING;
    }
  }
  changed_.notify_all();
}

HealthService::ServingStatus HealthService::StatusLocked(
    const std::string& service) const {
  auto it = statuses_.find(service);
  return it == statuses_.end() ? HealthCheckResponse::SERVICE_UNKNOWN
                               : it->second;
}

grpc::Status HealthService::Check(grpc::ServerContext* /*context*/,
                                  const HealthCheckRequest* request,
                                  HealthCheckResponse* response) {
  std::lock_guard<std::mutex> lock(mutex_);
  const ServingStatus status = StatusLocked(request->service());
  if (status == HealthCheckResponse::SERVICE_UNKNOWN) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service");
  }
  response->set_status(status);
  return grpc::Status::OK;
}

grpc::Status HealthService::Watch(
    grpc::ServerContext* context, const HealthCheckRequest* request,
    grpc::ServerWriter<HealthCheckResponse>* writer) {
  std::optional<ServingStatus> sent;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    const ServingStatus status = StatusLocked(request->service());
    if (status != sent) {
      // Shutdown set every status before shut_down_, under the same lock:
      // the status it set is sent before the call ends.
      lock.unlock();
      HealthCheckResponse response;
      response.set_status(status);
      if (!writer->Write(response)) {
        return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
      }
      sent = status;
      lock.lock();
      continue;
    }
    if (shut_down_) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "cachewatchd is stopping");
    }
    if (context->IsCancelled()) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
    }
    changed_.wait_for(lock, kWatchCancelPoll);
  }
}

}  // namespace cachewatch
