import CWSPipeShims
import Glibc
import WebSocketEngine
import Synchronization

/// SIGINT, SIGTERM and SIGHUP. Installed before connecting, when there is no WebSocket to
/// close yet: a signal then exits at once with 128 + the signal. Once the handshake is done,
/// the first signal asks the network thread for a closing handshake (1001) and an exit with
/// 128 + the signal; a second one, or any once the session is only flushing stdout, exits
/// at once. The handler only touches atomics and an eventfd, which is async-signal-safe.
enum Signals {
    static let pending = Atomic<Int32>(0)
    static let received = Atomic<Int32>(0)
    static let exitAtOnce = Atomic<Bool>(true)
    nonisolated(unsafe) static var wakeFD: Int32 = -1

    static func install(wakeFD: Int32) {
        Signals.wakeFD = wakeFD
        for number in [SIGINT, SIGTERM, SIGHUP] {
            _ = wsp_signal(number) { number in
                let count = Signals.received.add(1, ordering: .relaxed).newValue
                if count > 1 || Signals.exitAtOnce.load(ordering: .relaxed) {
                    _exit(128 + number)
                }
                Signals.pending.store(number, ordering: .relaxed)
                if Signals.wakeFD >= 0 { wsp_eventfd_signal(Signals.wakeFD) }
            }
        }
    }

    /// The signal received since the last call, if any.
    static func take() -> Int32? {
        let number = pending.exchange(0, ordering: .relaxed)
        return number == 0 ? nil : number
    }
}
