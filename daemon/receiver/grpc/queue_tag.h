// QueueTag: a tag on the ingest completion queue (the one Record's streams
// and the unary ingest calls share, record_stream.h): the operation that
// completed. The queue's threads call Complete with the queue's `ok`.
//
// A tag is handed to gRPC as Tag() and read back as a QueueTag*, so the
// pointer's type survives the round trip through void*. Not thread-safe by
// itself: its owner serializes what Complete touches.
#ifndef CACHEWATCH_DAEMON_RECEIVER_GRPC_QUEUE_TAG_H_
#define CACHEWATCH_DAEMON_RECEIVER_GRPC_QUEUE_TAG_H_

namespace cachewatch {

class QueueTag {
 public:
  virtual void Complete(bool ok) = 0;
  // What to pass to gRPC as the operation's tag.
  void* Tag() { return this; }

 protected:
  ~QueueTag() = default;
};

// A QueueTag that calls `object->*on_done(ok)`.
template <typename T>
class MemberTag final : public QueueTag {
 public:
  MemberTag(T* object, void (T::*on_done)(bool ok))
      : object_(object), on_done_(on_done) {}
  void Complete(bool ok) override { (object_->*on_done_)(ok); }

 private:
  T* const object_;
  void (T::*const on_done_)(bool ok);
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_RECEIVER_GRPC_QUEUE_TAG_H_
