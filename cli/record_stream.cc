#include "cli/record_stream.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/daemon_connection.h"
#include "cli/format.h"
#include "daemon/core/classifier.h"

namespace cachewatch::cli {
namespace {

constexpr size_t kRefusalsKept = 5;

}  // namespace

int AckTally::refused() const {
  int refused = 0;
  for (const auto& [code, count] : by_code) {
    if (code != 0) refused += count;
  }
  return refused;
}

std::string DescribeTally(const AckTally& tally, int64_t sent) {
  const auto ok = tally.by_code.find(0);
  std::string out = absl::StrFormat(
      "sent %d records, %d acknowledged: %d ok (%d duplicate), %d refused\n",
      sent, tally.acknowledged, ok == tally.by_code.end() ? 0 : ok->second,
      tally.duplicates, tally.refused());
  for (const auto& [code, count] : tally.by_code) {
    if (code != 0) absl::StrAppend(&out, "  code ", code, ": ", count, "\n");
  }
  for (const std::string& refusal : tally.first_refusals) {
    absl::StrAppend(&out, "  refused ", refusal, "\n");
  }
  std::string verdicts;
  for (const auto& [verdict, count] : tally.verdicts) {
    absl::StrAppend(&verdicts, verdicts.empty() ? "" : ", ",
                    VerdictName(verdict), " ", count);
  }
  absl::StrAppend(&out, "verdicts when acknowledged: ",
                  verdicts.empty() ? "none" : verdicts, "\n");
  if (!tally.breaks_by_reason.empty()) absl::StrAppend(&out, "breaks:\n");
  for (const auto& [reason, count] : tally.breaks_by_reason) {
    absl::StrAppend(
        &out, absl::StrFormat("  %-40s %6d\n", ReasonName(reason), count));
  }
  return out;
}

RecordStream::RecordStream(v1::CacheWatch::Stub& stub,
                           const GlobalOptions& options)
    : options_(options), stream_([&] {
        Authorize(context_, options);
        return stub.Record(&context_);
      }()) {
  reader_ = std::thread([this] { ReadAcks(); });
}

RecordStream::~RecordStream() {
  if (!finished_) {
    context_.TryCancel();
    reader_.join();
  }
}

void RecordStream::ReadAcks() {
  v1::RecordAck ack;
  while (stream_->Read(&ack)) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++tally_.acknowledged;
    ++tally_.by_code[ack.code()];
    if (ack.duplicate()) ++tally_.duplicates;
    if (ack.code() != 0 && tally_.first_refusals.size() < kRefusalsKept) {
      tally_.first_refusals.push_back(
          absl::StrCat(ack.request_id(), ": ", ack.message()));
    }
    if (ack.code() == 0 && ack.is_usage() && !ack.duplicate()) {
      const v1::TurnClassification& classification = ack.classification();
      ++tally_.verdicts[classification.verdict()];
      if (classification.verdict() == v1::VERDICT_BREAK) {
        ++tally_
              .breaks_by_reason[classification.cache_break().primary_reason()];
      }
    }
  }
}

bool RecordStream::Send(const v1::RecordRequest& record) {
  return stream_->Write(record);
}

absl::StatusOr<AckTally> RecordStream::Finish() {
  stream_->WritesDone();
  reader_.join();
  finished_ = true;
  const grpc::Status status = stream_->Finish();
  if (!status.ok()) return FromRpcStatus(status, "Record", options_);
  std::lock_guard<std::mutex> lock(mutex_);
  return tally_;
}

}  // namespace cachewatch::cli
