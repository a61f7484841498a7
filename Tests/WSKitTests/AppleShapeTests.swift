import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
import TestSupport
import WSKitFoundation

/// Code as the iOS articles write it around `URLSessionWebSocketTask` (a manager with
/// connect/listen/sendMessage/sendPing/disconnect and exponential back-off), changed only
/// where the task is created (`WebSocketTask(with:)` instead of
/// `URLSession.shared.webSocketTask(with:)`).
final class WebSocketManager: @unchecked Sendable {
    private var webSocketTask: WebSocketTask?
    private let url: URL
    private let token: String
    private var retryCount = 0
    private let maxRetryCount = 5
    private let lock = NSLock()
    private(set) var received: [String] = []
    var onMessage: (@Sendable (String) -> Void)?

    init(url: URL, token: String) {
        self.url = url
        self.token = token
    }

    func connect() {
        var request = URLRequest(url: url)
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        request.setValue("chat.v1", forHTTPHeaderField: "Sec-WebSocket-Protocol")
        webSocketTask = WebSocketTask(with: request)   // Apple: URLSession.shared.webSocketTask(with: request)
        webSocketTask?.resume()
        listen()
    }

    func listen() {
        webSocketTask?.receive { [weak self] result in
            guard let self else { return }
            switch result {
            case .success(let message):
                self.retryCount = 0
                switch message {
                case .string(let text):
                    self.lock.lock(); self.received.append(text); self.lock.unlock()
                    self.onMessage?(text)
                case .data(let data):
                    self.onMessage?(String(decoding: data, as: UTF8.self))
                }
                self.listen()
            case .failure:
                self.reconnect()
            }
        }
    }

    func sendMessage(_ text: String) async throws {
        try await webSocketTask?.send(.string(text))
    }

    func sendMessage(_ text: String, completion: @escaping @Sendable ((any Error)?) -> Void) {
        webSocketTask?.send(.string(text), completionHandler: completion)
    }

    func sendPing() {
        webSocketTask?.sendPing { error in
            if let error { print("ping failed: \(error)") }
        }
    }

    func disconnect() {
        webSocketTask?.cancel(with: .goingAway, reason: "bye".data(using: .utf8))
        webSocketTask = nil
    }

    private func reconnect() {
        guard webSocketTask != nil, retryCount < maxRetryCount else { return }
        retryCount += 1
        let delay = pow(2.0, Double(retryCount))   // 2, 4, 8... s
        DispatchQueue.global().asyncAfter(deadline: .now() + delay) { [weak self] in self?.connect() }
    }
}

final class AppleShapeTests: XCTestCase {
    func testManagerWrittenForURLSessionWebSocketTaskRuns() throws {
        let peer = try Peer.launch(executable: Locations.python, arguments: ["\(Locations.peers)/echo.py", "--port", "0", "--subprotocols", "chat.v1"],
                                   environment: Locations.baseEnvironment)
        defer { peer.process.kill() }
        let manager = WebSocketManager(url: URL(string: "ws://127.0.0.1:\(peer.port)/chat")!, token: "secret")
        let echoed = expectation(description: "echo")
        manager.onMessage = { text in if text == "hello" { echoed.fulfill() } }
        manager.connect()
        manager.sendMessage("hello") { error in XCTAssertNil(error) }
        manager.sendPing()
        wait(for: [echoed], timeout: 10)
        manager.disconnect()
    }

    func testTaskDefaultsAndCloseCode() async throws {
        let peer = try Peer.launch(executable: Locations.python, arguments: ["\(Locations.peers)/echo.py", "--port", "0"],
                                   environment: Locations.baseEnvironment)
        defer { peer.process.kill() }
        let task = WebSocketTask(with: URL(string: "ws://127.0.0.1:\(peer.port)/")!)
        XCTAssertEqual(task.maximumMessageSize, 1 << 20)
        XCTAssertEqual(task.closeCode, .invalid)
        task.resume()
        try await task.send(.data(Data([1, 2, 3])))
        let reply = try await task.receive()
        XCTAssertEqual(reply, .data(Data([1, 2, 3])))
        XCTAssertEqual(WebSocketTask.CloseCode(rawValue: 4000), .other(4000))
        XCTAssertEqual(WebSocketTask.CloseCode(rawValue: 1001), .goingAway)
        task.cancel(with: .normalClosure, reason: nil)
    }
}
