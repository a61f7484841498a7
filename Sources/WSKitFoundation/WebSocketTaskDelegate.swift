import Foundation
import WSKit

/// Told of a `WebSocketTask`'s opening, close and completion, as Apple's
/// `URLSessionWebSocketDelegate` and `URLSessionTaskDelegate` (FoundationNetworking declares
/// those names, so these are the task's own). Given at the task's creation with its
/// delegate queue, where every call runs, one at a time and in turn with the completion
/// handlers; held strongly until the task completes. Every method has an empty default.
public protocol WebSocketTaskDelegate: AnyObject {
    /// The handshake succeeded; `protocol` is the subprotocol the server chose (nil: none).
    func webSocketTask(_ task: WebSocketTask, didOpenWithProtocol protocol: String?)
    /// The closing handshake completed: the peer's code and reason, or after our own
    /// cancel the ones we sent (as `closeCode` and `closeReason`).
    func webSocketTask(_ task: WebSocketTask, didCloseWith closeCode: WebSocketTask.CloseCode, reason: Data?)
    /// The task is over: nil after a closing handshake, else why (`WebSocketError`;
    /// `.cancelled` when it was cancelled before it opened). The last call the task makes.
    func webSocketTask(_ task: WebSocketTask, didCompleteWithError error: (any Error)?)
}

public extension WebSocketTaskDelegate {
    /// Does nothing.
    func webSocketTask(_ task: WebSocketTask, didOpenWithProtocol protocol: String?) {}
    /// Does nothing.
    func webSocketTask(_ task: WebSocketTask, didCloseWith closeCode: WebSocketTask.CloseCode, reason: Data?) {}
    /// Does nothing.
    func webSocketTask(_ task: WebSocketTask, didCompleteWithError error: (any Error)?) {}
}

/// The delegate, called only on the delegate queue (through `CallbackQueue`, one call at
/// a time), hence unchecked.
final class DelegateBox: @unchecked Sendable {
    private let delegate: any WebSocketTaskDelegate

    init(_ delegate: any WebSocketTaskDelegate) { self.delegate = delegate }

    func call(on callbacks: CallbackQueue, _ body: @escaping @Sendable (any WebSocketTaskDelegate) -> Void) {
        callbacks.run { [self] in body(delegate) }
    }
}

/// `localizedDescription` is WSKit's sentence (Foundation's default says only "The
/// operation could not be completed. (WSKit.WebSocketError error 5.)"). Here, not in
/// WSKit, which does not import Foundation.
extension WebSocketError: LocalizedError {
    /// The same sentence as `description`.
    public var errorDescription: String? { description }
}
