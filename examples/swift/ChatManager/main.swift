// A client in the shape of the URLSessionWebSocketTask articles: a WebSocketManager class
// with a recursive receive(completionHandler:), sends with completion handlers, a ping on
// a timer, cancel(with: .goingAway), a Bearer token and Sec-WebSocket-Protocol on a
// URLRequest, exponential back-off with a retry cap, and the delegate's open and close.
// Only the task's creation differs from Apple's code:
//
//     URLSession(configuration: .default, delegate: self, delegateQueue: nil).webSocketTask(with: request)
//     ->  WebSocketTask(with: request, delegate: self)
//
// Each line of standard input is sent as a text message; replies print as "< text". At the
// end of input (once the replies are in) it closes with 1001. --async reads with an async
// receive() loop instead of the recursive handler.
//
//   .venv/bin/python examples/servers/echo_server.py --port 8766 --token secret --subprotocols chat.v1 &
//   swift run chat-manager ws://127.0.0.1:8766/ secret [--async] [--ping-interval S] [--retry-base S]
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import WSKitFoundation

final class WebSocketManager: WebSocketTaskDelegate, @unchecked Sendable {
    private let url: URL
    private let token: String
    private let asyncReceive: Bool
    private let pingInterval: Double
    private let retryBase: Double
    private let maxRetryCount = 3
    private let lock = NSLock()
    private var webSocketTask: WebSocketTask?
    private var pingTimer: DispatchSourceTimer?
    private var retryCount = 0
    private var disconnecting = false
    private var sent = 0
    private var received = 0
    let finished = DispatchSemaphore(value: 0)
    var exitStatus: Int32 = 0

    init(url: URL, token: String, asyncReceive: Bool, pingInterval: Double, retryBase: Double) {
        self.url = url
        self.token = token
        self.asyncReceive = asyncReceive
        self.pingInterval = pingInterval
        self.retryBase = retryBase
    }

    /// Every message sent has had its reply.
    var caughtUp: Bool { lock.withLock { received >= sent } }

    func connect() {
        var request = URLRequest(url: url)
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        request.setValue("chat.v1", forHTTPHeaderField: "Sec-WebSocket-Protocol")
        let task = WebSocketTask(with: request, delegate: self)  // Apple: session.webSocketTask(with: request)
        lock.withLock { webSocketTask = task }
        task.resume()
        if asyncReceive {
            Task { await self.receiveLoop(task) }
        } else {
            listen(task)
        }
    }

    // MARK: URLSessionWebSocketDelegate's calls, under WebSocketTaskDelegate's names

    func webSocketTask(_ task: WebSocketTask, didOpenWithProtocol protocol: String?) {
        say("connected (\(`protocol` ?? "no subprotocol"))")
        lock.withLock { retryCount = 0 }
        startPinging(task)
    }

    func webSocketTask(_ task: WebSocketTask, didCloseWith closeCode: WebSocketTask.CloseCode, reason: Data?) {
        say("closed: \(closeCode.rawValue) \(String(decoding: reason ?? Data(), as: UTF8.self))")
    }

    func webSocketTask(_ task: WebSocketTask, didCompleteWithError error: (any Error)?) {
        if lock.withLock({ disconnecting }) { finished.signal() }
    }

    // MARK: Receiving

    private func listen(_ task: WebSocketTask) {
        task.receive { [weak self] result in
            guard let self else { return }
            switch result {
            case .success(let message):
                self.show(message)
                self.listen(task)
            case .failure(let error):
                self.failed(error)
            }
        }
    }

    private func receiveLoop(_ task: WebSocketTask) async {
        do {
            while true { show(try await task.receive()) }
        } catch {
            failed(error)
        }
    }

    private func show(_ message: WebSocketTask.Message) {
        switch message {
        case .string(let text): say("< \(text)")
        case .data(let data): say("< [\(data.count) bytes]")
        }
        lock.withLock { received += 1 }
    }

    // MARK: Sending

    func send(_ text: String) {
        let task = lock.withLock { () -> WebSocketTask? in
            sent += 1
            return webSocketTask
        }
        task?.send(.string(text)) { error in
            if let error { say("send failed: \(error.localizedDescription)") }
        }
    }

    private func startPinging(_ task: WebSocketTask) {
        let timer = DispatchSource.makeTimerSource(queue: .global())
        timer.schedule(deadline: .now() + pingInterval, repeating: pingInterval)
        timer.setEventHandler {
            task.sendPing { error in say(error.map { "ping failed: \($0.localizedDescription)" } ?? "pong") }
        }
        lock.withLock {
            pingTimer?.cancel()
            pingTimer = timer
        }
        timer.resume()
    }

    // MARK: Ending and reconnecting

    /// Closes with 1001; the delegate's didCompleteWithError ends the program.
    func disconnect() {
        let task = lock.withLock { () -> WebSocketTask? in
            disconnecting = true
            pingTimer?.cancel()
            return webSocketTask
        }
        task?.cancel(with: .goingAway, reason: "bye".data(using: .utf8))
    }

    private func failed(_ error: any Error) {
        let retry = lock.withLock { () -> Int? in
            pingTimer?.cancel()
            if disconnecting { return nil }
            guard retryCount < maxRetryCount else { return 0 }
            retryCount += 1
            return retryCount
        }
        guard let retry else { return }
        guard retry > 0 else {
            say("giving up after \(maxRetryCount) retries: \(error.localizedDescription)")
            exitStatus = 1
            finished.signal()
            return
        }
        let delay = retryBase * pow(2.0, Double(retry - 1))  // 1, 2, 4 times the base
        say("disconnected: \(error.localizedDescription); retry \(retry) in \(delay) s")
        DispatchQueue.global().asyncAfter(deadline: .now() + delay) { [weak self] in self?.connect() }
    }
}

/// Prints a line at once (print's output waits in a buffer when it goes into a pipe).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// The value after `name` (removed from `arguments`).
func option(_ name: String, in arguments: inout [String]) -> Double? {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    defer { arguments.removeSubrange(index...(index + 1)) }
    return Double(arguments[index + 1])
}

var arguments = Array(CommandLine.arguments.dropFirst())
let pingInterval = option("--ping-interval", in: &arguments) ?? 10
let retryBase = option("--retry-base", in: &arguments) ?? 1
let asyncReceive = arguments.contains("--async")
arguments.removeAll { $0 == "--async" }
guard arguments.count == 2, let url = URL(string: arguments[0]) else {
    say("usage: chat-manager ws://HOST:PORT/PATH TOKEN [--async] [--ping-interval S] [--retry-base S]")
    exit(2)
}
let manager = WebSocketManager(url: url, token: arguments[1], asyncReceive: asyncReceive,
                               pingInterval: pingInterval, retryBase: retryBase)
manager.connect()
// Lines are read on a thread of their own; the end of input closes once the replies are in.
Thread.detachNewThread {
    while let line = readLine() { manager.send(line) }
    let deadline = Date().addingTimeInterval(5)
    while !manager.caughtUp && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
    manager.disconnect()
}
manager.finished.wait()
exit(manager.exitStatus)
