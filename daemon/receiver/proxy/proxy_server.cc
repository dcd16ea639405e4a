#include "daemon/receiver/proxy/proxy_server.h"

#include <openssl/ssl.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/util/status_macros.h"

namespace cachewatch {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using asio::awaitable;
using beast::error_code;

constexpr uint32_t kHeaderLimit = 256 * 1024;
constexpr auto kClientIdleTimeout = std::chrono::seconds(300);
constexpr auto kConnectTimeout = std::chrono::seconds(10);
constexpr size_t kRelayBufferBytes = 16 * 1024;
// Read buffers start this large: Beast reads at most the free capacity (at
// least 512 bytes), so a 200 KB request would otherwise take 400 reads.
constexpr size_t kReadBufferBytes = 64 * 1024;

auto Await(error_code& ec) {
  return asio::redirect_error(asio::use_awaitable, ec);
}

int64_t NowUnixUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Lower(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) c = std::tolower(static_cast<unsigned char>(c));
  return lower;
}

std::string Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  return std::string(text);
}

// Headers meant for one connection only (RFC 9110 §7.6.1), and those the
// Connection header names.
class HopByHop {
 public:
  explicit HopByHop(const http::fields& fields) {
    for (const auto& field : fields) {
      if (field.name() != http::field::connection) continue;
      std::string_view value = field.value();
      for (;;) {
        const size_t comma = value.find(',');
        named_.push_back(Lower(Trim(value.substr(0, comma))));
        if (comma == std::string_view::npos) break;
        value.remove_prefix(comma + 1);
      }
    }
  }

  bool Contains(const std::string& lower_name) const {
    static constexpr std::string_view kAlways[] = {
        "connection",        "keep-alive",
        "proxy-connection",  "te",
        "trailer",           "transfer-encoding",
        "upgrade",           "proxy-authorization",
        "proxy-authenticate"};
    return std::find(std::begin(kAlways), std::end(kAlways), lower_name) !=
               std::end(kAlways) ||
           std::find(named_.begin(), named_.end(), lower_name) != named_.end();
  }

 private:
  std::vector<std::string> named_;
};

// Headers that carry the caller's credentials: forwarded, never observed.
bool Credential(const std::string& lower_name) {
  return lower_name == "authorization" || lower_name == "x-api-key" ||
         lower_name == "api-key" || lower_name == "cookie" ||
         lower_name == "x-goog-api-key";
}

// Copies the end-to-end headers of `from` into `to` in order; `host`, when
// not null, replaces the Host header (kept in its place). Appends what the
// observer may see to `observed`.
void CopyHeaders(const http::fields& from, http::fields& to,
                 const std::string* host, HttpHeaders& observed) {
  const HopByHop hop_by_hop(from);
  bool host_set = false;
  for (const auto& field : from) {
    std::string name = Lower(field.name_string());
    if (hop_by_hop.Contains(name)) continue;
    if (host != nullptr && name == "expect") continue;  // Answered here.
    if (host != nullptr && name == "host") {
      if (host_set) continue;
      host_set = true;
      to.insert(field.name_string(), *host);
      observed.emplace_back(std::move(name), *host);
      continue;
    }
    to.insert(field.name_string(), field.value());
    if (!Credential(name)) {
      observed.emplace_back(std::move(name), std::string(field.value()));
    }
  }
  if (host != nullptr && !host_set) {
    to.set(http::field::host, *host);
    observed.emplace_back("host", *host);
  }
}

bool IsIpAddress(const std::string& host) {
  error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

// The connection to an upstream a client connection keeps between its
// requests (keep-alive towards the upstream too).
struct UpstreamConnection {
  const ProxyUpstream* upstream = nullptr;  // Null: not connected.
  std::optional<beast::tcp_stream> tcp;
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls;
  beast::flat_buffer buffer;

  void Close() {
    error_code ignored;
    if (tls) beast::get_lowest_layer(*tls).socket().close(ignored);
    if (tcp) tcp->socket().close(ignored);
    tls.reset();
    tcp.reset();
    upstream = nullptr;
    buffer.clear();  // Keeps its capacity.
  }
};

// One agent connection as BeginShutdown sees it. `stream` and `in_request`
// are touched only on the connection's strand (`executor`).
struct ClientConnection {
  explicit ClientConnection(asio::any_io_executor strand)
      : executor(std::move(strand)) {}

  const asio::any_io_executor executor;
  beast::tcp_stream* stream = nullptr;  // Null once the connection ended.
  bool in_request = false;  // From a request's header to its answer.
};

// How relaying one request went.
enum class Relayed {
  kComplete,    // The whole response reached the agent.
  kNoResponse,  // Nothing came back from the upstream; nothing was sent.
  kDropped,     // The upstream broke off the response.
  kClientGone,  // The agent went away.
};

}  // namespace

class ProxyServer::Impl {
 public:
  Impl(const ProxyOptions& options, ProxyRoutes routes,
       ExchangeObserver* observer, ObservationQueue* queue,
       ProxyMetrics* metrics)
      : options_(options),
        routes_(std::move(routes)),
        observer_(observer),
        queue_(queue),
        metrics_(metrics),
        tls_context_(ssl::context::tls_client),
        acceptor_(asio::make_strand(io_)) {}

  ~Impl() {
    CloseAcceptor();
    io_.stop();
    for (std::thread& thread : threads_) thread.join();
  }

  void BeginShutdown() {
    if (shutting_down_.exchange(true)) return;
    CloseAcceptor();
    std::lock_guard<std::mutex> lock(mutex_);
    for (const std::shared_ptr<ClientConnection>& connection : connections_) {
      // On the connection's strand, so either its coroutine is suspended
      // (waiting for a request, or inside one) or it has not yet looked at
      // shutting_down_ since the exchange above and will stop on its own.
      asio::post(connection->executor, [connection] {
        if (connection->stream != nullptr && !connection->in_request) {
          connection->stream->cancel();
        }
      });
    }
  }

  bool WaitForRequests(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mutex_);
    return requests_done_.wait_until(lock, deadline,
                                     [this] { return requests_ == 0; });
  }

  absl::Status Start() {
    tls_context_.set_verify_mode(ssl::verify_peer);
    error_code ec;
    if (options_.upstream_ca.empty()) {
      tls_context_.set_default_verify_paths(ec);
    } else {
      tls_context_.load_verify_file(options_.upstream_ca, ec);
    }
    if (ec) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--proxy-upstream-ca '", options_.upstream_ca, "': ", ec.message()));
    }
    const size_t colon = options_.listen.rfind(':');
    std::string host = options_.listen.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[') {
      host = host.substr(1, host.size() - 2);
    }
    const asio::ip::address address = asio::ip::make_address(host, ec);
    int port = -1;
    if (colon != std::string::npos) {
      try {
        port = std::stoi(options_.listen.substr(colon + 1));
      } catch (const std::exception&) {
      }
    }
    if (ec || port < 0 || port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--proxy-listen '", options_.listen, "': expected IP:PORT"));
    }
    const tcp::endpoint endpoint(address, static_cast<uint16_t>(port));
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return absl::UnavailableError(absl::StrCat(
          "--proxy-listen '", options_.listen, "': ", ec.message()));
    }
    const tcp::endpoint bound = acceptor_.local_endpoint();
    address_ = (bound.address().is_v6() ? "[" + host + "]" : host) + ":" +
               std::to_string(bound.port());
    asio::co_spawn(acceptor_.get_executor(), Accept(), asio::detached);
    for (int i = 0; i < std::max(1, options_.threads); ++i) {
      threads_.emplace_back([this] { io_.run(); });
    }
    return absl::OkStatus();
  }

  const std::string& address() const { return address_; }

 private:
  using Request = http::request<http::string_body>;

  void CloseAcceptor() {
    asio::post(acceptor_.get_executor(), [this] {
      error_code ignored;
      acceptor_.close(ignored);
    });
  }

  // Counts a request in flight from its header to its answer.
  class RequestInFlight {
   public:
    RequestInFlight(Impl* impl, ClientConnection* connection)
        : impl_(impl), connection_(connection) {
      connection_->in_request = true;
      std::lock_guard<std::mutex> lock(impl_->mutex_);
      ++impl_->requests_;
    }
    ~RequestInFlight() {
      connection_->in_request = false;
      std::lock_guard<std::mutex> lock(impl_->mutex_);
      if (--impl_->requests_ == 0) impl_->requests_done_.notify_all();
    }
    RequestInFlight(const RequestInFlight&) = delete;
    RequestInFlight& operator=(const RequestInFlight&) = delete;

   private:
    Impl* const impl_;
    ClientConnection* const connection_;
  };

  // Registers an agent connection for BeginShutdown while it is served.
  class Registered {
   public:
    Registered(Impl* impl, beast::tcp_stream* stream)
        : impl_(impl),
          connection_(
              std::make_shared<ClientConnection>(stream->get_executor())) {
      connection_->stream = stream;
      std::lock_guard<std::mutex> lock(impl_->mutex_);
      impl_->connections_.insert(connection_);
    }
    ~Registered() {
      connection_->stream = nullptr;
      std::lock_guard<std::mutex> lock(impl_->mutex_);
      impl_->connections_.erase(connection_);
    }
    Registered(const Registered&) = delete;
    Registered& operator=(const Registered&) = delete;

    ClientConnection* connection() const { return connection_.get(); }

   private:
    Impl* const impl_;
    const std::shared_ptr<ClientConnection> connection_;
  };

  awaitable<void> Accept() {
    for (;;) {
      tcp::socket socket(asio::make_strand(io_));
      error_code ec;
      co_await acceptor_.async_accept(socket, Await(ec));
      if (ec == asio::error::operation_aborted) co_return;
      if (ec) continue;  // E.g. out of descriptors: the agent retries.
      socket.set_option(tcp::no_delay(true), ec);
      auto executor = socket.get_executor();
      asio::co_spawn(executor, Serve(beast::tcp_stream(std::move(socket))),
                     asio::detached);
    }
  }

  // One agent connection: requests one after the other (HTTP/1.1
  // keep-alive) until either side closes.
  awaitable<void> Serve(beast::tcp_stream client) {
    beast::flat_buffer buffer;
    buffer.reserve(kReadBufferBytes);
    UpstreamConnection upstream;
    upstream.buffer.reserve(kReadBufferBytes);
    const Registered registered(this, &client);
    while (!shutting_down_.load()) {
      http::request_parser<http::string_body> parser;
      parser.header_limit(kHeaderLimit);
      parser.body_limit(options_.max_request_bytes);
      error_code ec;
      client.expires_after(kClientIdleTimeout);
      co_await http::async_read_header(client, buffer, parser, Await(ec));
      if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
          ec == asio::error::connection_reset ||
          ec == asio::error::operation_aborted) {
        break;
      }
      const RequestInFlight in_flight(this, registered.connection());
      if (ec) {
        metrics_->OnRequest(ProxyMetrics::Outcome::kBadRequest);
        co_await Answer(
            client, http::status::bad_request, ErrorShape::kOpenAI,
            "invalid_request_error",
            "cachewatch proxy: malformed HTTP request: " + ec.message(), false);
        break;
      }
      const auto expect = parser.get().find(http::field::expect);
      if (expect != parser.get().end() &&
          Lower(expect->value()) == "100-continue") {
        static constexpr std::string_view kContinue =
            "HTTP/1.1 100 Continue\r\n\r\n";
        co_await asio::async_write(client, asio::buffer(kContinue), Await(ec));
        if (ec) break;
      }
      co_await http::async_read(client, buffer, parser, Await(ec));
      const ErrorShape shape =
          parser.get().find("anthropic-version") != parser.get().end()
              ? ErrorShape::kAnthropic
              : ErrorShape::kOpenAI;
      if (ec == http::error::body_limit) {
        metrics_->OnRequest(ProxyMetrics::Outcome::kTooLarge);
        co_await Answer(client, http::status::payload_too_large, shape,
                        shape == ErrorShape::kAnthropic
                            ? "request_too_large"
                            : "invalid_request_error",
                        absl::StrCat("cachewatch proxy: request body over ",
                                     options_.max_request_bytes,
                                     " bytes (--proxy-max-request-bytes)"),
                        false);
        break;
      }
      if (ec) {
        metrics_->OnRequest(ProxyMetrics::Outcome::kClientGone);
        break;
      }
      client.expires_never();
      Request request = parser.release();
      if (!co_await Forward(client, request, shape, upstream)) break;
    }
    upstream.Close();
    error_code ignored;
    client.socket().shutdown(tcp::socket::shutdown_send, ignored);
    client.close();
  }

  // Forwards one request and relays its response; false when the agent
  // connection must be closed.
  awaitable<bool> Forward(beast::tcp_stream& client, Request& request,
                          ErrorShape shape, UpstreamConnection& upstream) {
    HttpExchange exchange;
    exchange.request_unix_us = NowUnixUs();
    exchange.method = std::string(request.method_string());
    const ProxyRoutes::Match match =
        routes_.Route(request.target(), shape == ErrorShape::kAnthropic);
    const bool keep_alive = request.keep_alive();
    const bool head = request.method() == http::verb::head;

    Request forwarded;
    forwarded.method_string(request.method_string());
    forwarded.target(match.target);
    forwarded.version(11);
    CopyHeaders(request.base(), forwarded.base(), &match.upstream->host_header,
                exchange.request_headers);
    forwarded.body() = std::move(request.body());
    // Only the anthropic and openai routes: the field is the providers'
    // own; compatible APIs (on /PREFIX routes) may refuse it.
    if (options_.request_diagnostics && match.upstream->route[0] != '/')
      AddDiagnosticsRequest(match, forwarded, exchange);
    if (request.has_content_length() || request.chunked() ||
        !forwarded.body().empty()) {
      forwarded.content_length(forwarded.body().size());
    }
    exchange.target = match.target;
    exchange.upstream_host = match.upstream->host;

    Relayed relayed = Relayed::kNoResponse;
    error_code connect_error;
    for (int attempt = 0; attempt < 2; ++attempt) {
      const bool reused = upstream.upstream == match.upstream;
      if (!reused) {
        connect_error = co_await Connect(upstream, *match.upstream);
        if (connect_error) break;
      }
      relayed = upstream.tls
                    ? co_await Relay(*upstream.tls, upstream, forwarded, head,
                                     keep_alive, client, exchange)
                    : co_await Relay(*upstream.tcp, upstream, forwarded, head,
                                     keep_alive, client, exchange);
      // A kept connection the upstream had closed meanwhile: once more on
      // a new one (nothing of the response was received or sent).
      if (relayed != Relayed::kNoResponse || !reused) break;
      upstream.Close();
    }
    exchange.response_unix_us = NowUnixUs();
    exchange.request_body = std::move(forwarded.body());

    bool keep_client = keep_alive;
    switch (relayed) {
      case Relayed::kComplete:
        metrics_->OnRequest(ProxyMetrics::Outcome::kForwarded);
        break;
      case Relayed::kNoResponse: {
        upstream.Close();
        metrics_->OnRequest(ProxyMetrics::Outcome::kUpstreamUnreachable);
        const std::string why = connect_error ? connect_error.message()
                                              : "no response to the request";
        keep_client = co_await Answer(
            client, http::status::bad_gateway, shape,
            shape == ErrorShape::kAnthropic ? "api_error" : "server_error",
            absl::StrCat("cachewatch proxy: upstream ", match.upstream->url,
                         " unreachable: ", why),
            keep_alive);
        break;
      }
      case Relayed::kDropped:
        metrics_->OnRequest(ProxyMetrics::Outcome::kUpstreamDropped);
        keep_client = false;
        break;
      case Relayed::kClientGone:
        metrics_->OnRequest(ProxyMetrics::Outcome::kClientGone);
        keep_client = false;
        break;
    }
    queue_->Submit(std::move(exchange));
    co_return keep_client;
  }

  void AddDiagnosticsRequest(const ProxyRoutes::Match& match,
                             Request& forwarded, const HttpExchange& exchange) {
    try {
      std::optional<std::string> body = observer_->WithDiagnosticsRequest(
          match.target, exchange.request_headers, forwarded.body());
      if (body.has_value()) forwarded.body() = *std::move(body);
    } catch (const std::exception&) {
      metrics_->OnObserveFailure(ProxyMetrics::ObserveFailure::kInternal);
    }
  }

  awaitable<error_code> Connect(UpstreamConnection& connection,
                                const ProxyUpstream& upstream) {
    connection.Close();
    auto executor = co_await asio::this_coro::executor;
    tcp::resolver resolver(executor);
    error_code ec;
    const tcp::resolver::results_type endpoints =
        co_await resolver.async_resolve(upstream.host, upstream.port,
                                        Await(ec));
    if (ec) co_return ec;
    if (upstream.tls) {
      connection.tls.emplace(executor, tls_context_);
    } else {
      connection.tcp.emplace(executor);
    }
    beast::tcp_stream& socket = connection.tls
                                    ? beast::get_lowest_layer(*connection.tls)
                                    : *connection.tcp;
    socket.expires_after(kConnectTimeout);
    co_await socket.async_connect(endpoints, Await(ec));
    if (ec) co_return ec;
    socket.socket().set_option(tcp::no_delay(true), ec);
    if (upstream.tls) {
      if (!IsIpAddress(upstream.host)) {
        SSL_set_tlsext_host_name(connection.tls->native_handle(),
                                 upstream.host.c_str());
      }
      connection.tls->set_verify_callback(
          ssl::host_name_verification(upstream.host));
      co_await connection.tls->async_handshake(ssl::stream_base::client,
                                               Await(ec));
      if (ec) co_return ec;
    }
    socket.expires_never();
    connection.upstream = &upstream;
    co_return error_code{};
  }

  // Sends `forwarded` on `stream` and relays the response to the agent as
  // it arrives, copying it into `exchange` up to the observation cap.
  template <typename Stream>
  awaitable<Relayed> Relay(Stream& stream, UpstreamConnection& connection,
                           Request& forwarded, bool head, bool keep_alive,
                           beast::tcp_stream& client, HttpExchange& exchange) {
    const auto timeout =
        std::chrono::seconds(options_.upstream_timeout_seconds);
    beast::tcp_stream& upstream_tcp = beast::get_lowest_layer(stream);
    error_code ec;
    upstream_tcp.expires_after(timeout);
    co_await http::async_write(stream, forwarded, Await(ec));
    if (ec) co_return Relayed::kNoResponse;

    // Interim responses (1xx; the proxy sends no Expect upstream, so only
    // e.g. 103 Early Hints) are read and dropped: the agent gets the final
    // one.
    std::optional<http::response_parser<http::buffer_body>> final_response;
    do {
      final_response.emplace();
      final_response->header_limit(kHeaderLimit);
      final_response->body_limit(boost::none);
      if (head) final_response->skip(true);
      co_await http::async_read_header(stream, connection.buffer,
                                       *final_response, Await(ec));
      if (ec) co_return Relayed::kNoResponse;
    } while (final_response->get().result_int() / 100 == 1 &&
             final_response->get().result_int() != 101);
    http::response_parser<http::buffer_body>& parser = *final_response;

    auto& in = parser.get();
    exchange.response_status = static_cast<int>(in.result_int());
    http::response<http::buffer_body> out;
    out.result(in.result_int());
    out.reason(in.reason());
    out.version(11);
    CopyHeaders(in.base(), out.base(), nullptr, exchange.response_headers);
    const unsigned status = in.result_int();
    const bool has_body =
        !head && status >= 200 && status != 204 && status != 304;
    if (has_body && !in.has_content_length()) out.chunked(true);
    out.keep_alive(keep_alive && !shutting_down_.load());

    http::response_serializer<http::buffer_body> serializer(out);
    client.expires_after(timeout);
    co_await http::async_write_header(client, serializer, Await(ec));
    if (ec) {
      connection.Close();
      co_return Relayed::kClientGone;
    }
    bool copy_full = false;
    char piece[kRelayBufferBytes];
    while (has_body && !serializer.is_done()) {
      size_t size = 0;
      if (!parser.is_done()) {
        in.body().data = piece;
        in.body().size = sizeof(piece);
        upstream_tcp.expires_after(timeout);
        co_await http::async_read_some(stream, connection.buffer, parser,
                                       Await(ec));
        if (ec == http::error::need_buffer) ec = {};
        if (ec) {
          connection.Close();
          co_return Relayed::kDropped;
        }
        size = sizeof(piece) - in.body().size;
        if (size == 0 && !parser.is_done()) continue;
        if (!copy_full && exchange.response_body.size() + size <=
                              options_.max_observed_bytes) {
          exchange.response_body.append(piece, size);
        } else if (!copy_full) {
          copy_full = true;
          metrics_->OnObserveFailure(
              ProxyMetrics::ObserveFailure::kResponseTooLarge);
        }
      }
      out.body().data = size == 0 ? nullptr : piece;
      out.body().size = size;
      out.body().more = !parser.is_done();
      client.expires_after(timeout);
      co_await http::async_write(client, serializer, Await(ec));
      if (ec == http::error::need_buffer) ec = {};
      if (ec) {
        connection.Close();
        co_return Relayed::kClientGone;
      }
    }
    client.expires_never();
    upstream_tcp.expires_never();
    exchange.response_complete = !copy_full;
    if (!parser.is_done() || !in.keep_alive()) connection.Close();
    co_return Relayed::kComplete;
  }

  // Answers the agent from the proxy itself; false when the connection
  // must be closed.
  awaitable<bool> Answer(beast::tcp_stream& client, http::status status,
                         ErrorShape shape, std::string_view type,
                         std::string_view message, bool keep_alive) {
    http::response<http::string_body> response(status, 11);
    response.set(http::field::content_type, "application/json");
    response.body() = ProxyErrorBody(shape, type, message);
    response.keep_alive(keep_alive);
    response.prepare_payload();
    error_code ec;
    client.expires_after(kConnectTimeout);
    co_await http::async_write(client, response, Await(ec));
    client.expires_never();
    co_return !ec && keep_alive;
  }

  const ProxyOptions options_;
  const ProxyRoutes routes_;
  ExchangeObserver* const observer_;
  ObservationQueue* const queue_;
  ProxyMetrics* const metrics_;
  // Before io_, as tls_context_: the coroutine frames io_ destroys
  // unregister their connections and requests here.
  std::atomic<bool> shutting_down_{false};
  std::mutex mutex_;
  std::unordered_set<std::shared_ptr<ClientConnection>>
      connections_;                        // Guarded by mutex_.
  int requests_ = 0;                       // Guarded by mutex_.
  std::condition_variable requests_done_;  // requests_ reached 0.
  // Before io_: the TLS streams in coroutine frames use it until io_ is
  // destroyed.
  ssl::context tls_context_;
  asio::io_context io_;
  tcp::acceptor acceptor_;  // On its own strand.
  std::string address_;
  std::vector<std::thread> threads_;
};

absl::StatusOr<std::unique_ptr<ProxyServer>> ProxyServer::Start(
    const ProxyOptions& options, ProxyRoutes routes, ExchangeObserver* observer,
    ObservationQueue* queue, ProxyMetrics* metrics) {
  auto impl = std::make_unique<Impl>(options, std::move(routes), observer,
                                     queue, metrics);
  CACHEWATCH_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<ProxyServer>(new ProxyServer(std::move(impl)));
}

ProxyServer::ProxyServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ProxyServer::~ProxyServer() = default;

std::string ProxyServer::address() const { return impl_->address(); }

void ProxyServer::BeginShutdown() { impl_->BeginShutdown(); }

bool ProxyServer::WaitForRequests(
    std::chrono::steady_clock::time_point deadline) {
  return impl_->WaitForRequests(deadline);
}

}  // namespace cachewatch
