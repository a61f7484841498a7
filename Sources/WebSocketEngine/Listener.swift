import Glibc
import WebSocketTransport

/// Accepts connections (TCP or Unix) on an `EventLoop` and hands each stream to `onAccept`.
///
/// Running out of descriptors (EMFILE) pauses accepting for `retryDelay` and then tries
/// again: the pending connection stays in the kernel's backlog, and the loop never spins on
/// a listening socket it cannot serve.
public final class Listener {
    public let socket: any ListeningSocket
    private let loop: EventLoop
    private var watch: EventLoop.Watch?
    private var retry: EventLoop.Timer?
    private let onAccept: (TCPStream) -> Void
    /// Seconds accepting pauses after EMFILE/ENFILE.
    public var retryDelay = 0.1
    /// Times accepting paused for lack of descriptors.
    public private(set) var exhaustedCount = 0
    /// False while paused by the owner (`pause`) or by exhaustion.
    public private(set) var isAccepting = false
    private var pausedByOwner = false

    public init(loop: EventLoop, socket: any ListeningSocket, onAccept: @escaping (TCPStream) -> Void) {
        self.loop = loop
        self.socket = socket
        self.onAccept = onAccept
    }

    public func start() {
        watch = loop.watch(socket.fileDescriptor) { [weak self] _ in self?.acceptAll() }
        // The pause for exhaustion ends; one the owner asked for meanwhile stays.
        retry = loop.timer { [weak self] in
            guard let self, !pausedByOwner else { return }
            setAccepting(true)
        }
        resume()
    }

    /// Stops accepting (connections wait in the backlog) until `resume`.
    public func pause() {
        pausedByOwner = true
        setAccepting(false)
    }

    public func resume() {
        pausedByOwner = false
        setAccepting(true)
    }

    /// Stops for good and closes the socket.
    public func close() {
        if let watch { loop.remove(watch) }
        if let retry { loop.arm(retry, at: nil) }
        watch = nil
        socket.close()
    }

    private func setAccepting(_ on: Bool) {
        guard let watch else { return }
        isAccepting = on
        loop.setInterest(watch, on ? .readable : [])
    }

    private func acceptAll() {
        // A bounded batch per turn, so a connection storm cannot starve the others.
        for _ in 0..<64 where isAccepting && !pausedByOwner {
            switch socket.accept() {
            case .accepted(let stream):
                onAccept(stream)
            case .wouldBlock, .failed:
                return
            case .exhausted:
                exhaustedCount += 1
                setAccepting(false)
                if let retry { loop.arm(retry, at: Instant.now().adding(seconds: retryDelay)) }
                return
            }
        }
    }
}
