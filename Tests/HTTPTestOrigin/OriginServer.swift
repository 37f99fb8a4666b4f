public import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import DiskCacheLocking

/// A request as the origin server received it.
public struct RecordedRequest: Sendable {
    public var method: String
    public var path: String
    public var headers: [(name: String, value: String)]
    public var body: Data

    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// What the origin server answers.
public struct ScriptedResponse: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: Data

    public init(status: Int = 200, _ headers: [(String, String)] = [], body: String = "") {
        self.status = status
        self.headers = headers
        self.body = Data(body.utf8)
    }
}

/// A real HTTP/1.1 origin on 127.0.0.1 (ephemeral port) whose answers each test scripts.
///
/// It records every request, can hold its answers until released (to keep requests in flight),
/// and answers at most `maximumRequests` requests, after which it closes connections.
public final class OriginServer: Sendable {
    public typealias Script = @Sendable (RecordedRequest) -> ScriptedResponse

    private struct State {
        var script: Script = { _ in ScriptedResponse(status: 404) }
        public var requests: [RecordedRequest] = []
        var isHolding = false
        var held: [EventLoopPromise<Void>] = []
        var requestWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
        var children: [any Channel] = []
        var dropsReusedConnections = false
    }

    public let maximumRequests: Int
    private let state = PthreadMutex(State())
    private let channel: any Channel

    /// The server's base URL, `http://127.0.0.1:<port>`.
    public let baseURL: URL

    public init(maximumRequests: Int = 200) async throws {
        self.maximumRequests = maximumRequests
        let box = PthreadMutex<OriginServer?>(nil)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { child in
                guard let server = box.withLock({ $0 }) else { return child.close() }
                server.state.withLock { $0.children.append(child) }
                return child.pipeline.configureHTTPServerPipeline().flatMapThrowing {
                    try child.pipeline.syncOperations.addHandler(Handler(server: server))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        self.channel = channel
        baseURL = URL(string: "http://127.0.0.1:\(channel.localAddress!.port!)")!
        box.withLock { $0 = self }
    }

    public func url(_ path: String) -> URL { URL(string: baseURL.absoluteString + path)! }

    /// Sets how the server answers from now on.
    public func respond(_ script: @escaping Script) {
        state.withLock { $0.script = script }
    }

    /// Every request received so far.
    public var requests: [RecordedRequest] { state.withLock { $0.requests } }
    /// Connections accepted so far.
    public var connectionCount: Int { state.withLock { $0.children.count } }
    public var requestCount: Int { state.withLock { $0.requests.count } }

    /// From now on a request that comes on a connection that already carried one is not
    /// answered: the connection is closed instead, as by an origin whose idle timeout fired just
    /// as the request arrived. A client must then ask again on a new connection.
    public func dropRequestsOnReusedConnections(_ drops: Bool = true) {
        state.withLock { $0.dropsReusedConnections = drops }
    }

    fileprivate var dropsReusedConnections: Bool { state.withLock { $0.dropsReusedConnections } }

    /// Holds every answer from now on until ``release()``.
    public func hold() { state.withLock { $0.isHolding = true } }

    /// Sends the held answers and stops holding.
    public func release() {
        let held = state.withLock { state in
            state.isHolding = false
            defer { state.held = [] }
            return state.held
        }
        for promise in held { promise.succeed() }
    }

    /// Returns once at least `count` requests have been received.
    public func waitForRequests(_ count: Int) async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state in
                if state.requests.count >= count { return true }
                state.requestWaiters.append((count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// Stops listening and closes every open connection; later requests fail to connect.
    public func stop() async throws {
        release()
        let children = state.withLock { $0.children }
        try await channel.close()
        for child in children { try? await child.close() }
    }

    fileprivate func received(_ request: RecordedRequest, on eventLoop: any EventLoop) -> (ScriptedResponse, EventLoopFuture<Void>?)? {
        let (script, gate, ready, overLimit) = state.withLock { state -> (Script, EventLoopPromise<Void>?, [CheckedContinuation<Void, Never>], Bool) in
            guard state.requests.count < maximumRequests else { return (state.script, nil, [], true) }
            state.requests.append(request)
            let count = state.requests.count
            let ready = state.requestWaiters.filter { $0.count <= count }.map(\.continuation)
            state.requestWaiters.removeAll { $0.count <= count }
            var gate: EventLoopPromise<Void>?
            if state.isHolding {
                gate = eventLoop.makePromise()
                state.held.append(gate!)
            }
            return (state.script, gate, ready, false)
        }
        for continuation in ready { continuation.resume() }
        guard !overLimit else { return nil }
        return (script(request), gate?.futureResult)
    }
}

private final class Handler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let server: OriginServer
    private var head: HTTPRequestHead?
    private var body = ByteBuffer()
    /// Requests this connection carried.
    private var carried = 0

    init(server: OriginServer) { self.server = server }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body.clear()
        case .body(var part):
            body.writeBuffer(&part)
        case .end:
            guard let head else { return }
            carried += 1
            if carried > 1, server.dropsReusedConnections {
                context.close(promise: nil)
                return
            }
            let request = RecordedRequest(
                method: head.method.rawValue, path: head.uri,
                headers: head.headers.map { ($0.name, $0.value) }, body: Data(body.readableBytesView)
            )
            guard let (response, gate) = server.received(request, on: context.eventLoop) else {
                context.close(promise: nil)
                return
            }
            let keepAlive = head.isKeepAlive
            let isHEAD = head.method == .HEAD
            if let gate {
                gate.assumeIsolated().whenSuccess { [self] in
                    write(response, keepAlive: keepAlive, isHEAD: isHEAD, context: context)
                }
            } else {
                write(response, keepAlive: keepAlive, isHEAD: isHEAD, context: context)
            }
        }
    }

    private func write(_ response: ScriptedResponse, keepAlive: Bool, isHEAD: Bool, context: ChannelHandlerContext) {
        var headers = HTTPHeaders(response.headers)
        // A HEAD answer may name the length a GET would have (as a real origin does).
        if response.status != 304 && response.status != 204 && !(isHEAD && headers.contains(name: "Content-Length")) {
            headers.replaceOrAdd(name: "Content-Length", value: String(response.body.count))
        }
        // Options a script put in Connection (naming hop-by-hop fields) are kept.
        let options = headers[canonicalForm: "Connection"].map(String.init)
        headers.replaceOrAdd(name: "Connection", value: (options + [keepAlive ? "keep-alive" : "close"]).joined(separator: ", "))
        let head = HTTPResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: response.status), headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if !isHEAD, response.status != 304, !response.body.isEmpty {
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: response.body)))), promise: nil)
        }
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            done.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        }
    }
}
