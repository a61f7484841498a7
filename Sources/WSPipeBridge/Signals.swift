import CWSPipeShims
import Glibc
import WebSocketEngine
import Synchronization

/// SIGINT, SIGTERM and SIGHUP. Installed before connecting, when there is no WebSocket to
/// close yet: a signal then kills the process at once. Once the handshake is done, the
/// first signal asks the network thread for a closing handshake (1001); a second one, or
/// any once the session is only flushing stdout, kills at once. The handler only touches
/// atomics and an eventfd, or dies (`wsp_die_of_signal`): all async-signal-safe.
///
/// Either way the process dies of the signal, as a shell expects of a program that handles
/// SIGINT ("Proper handling of SIGINT/SIGQUIT", Cracauer): a loop stops at the first Ctrl-C,
/// and systemd counts a stop by SIGTERM as clean. After a closing, `dieOfSignalIfStopped`
/// does it at the very end of the process.
enum Signals {
    static let pending = Atomic<Int32>(0)
    static let received = Atomic<Int32>(0)
    /// The first signal received: the one the process dies of at the end.
    static let first = Atomic<Int32>(0)
    static let exitAtOnce = Atomic<Bool>(true)
    nonisolated(unsafe) static var wakeFD: Int32 = -1

    static func install(wakeFD: Int32) {
        Signals.wakeFD = wakeFD
        for number in [SIGINT, SIGTERM, SIGHUP] {
            _ = wsp_signal(number) { number in
                _ = Signals.first.compareExchange(expected: 0, desired: number, ordering: .relaxed)
                let count = Signals.received.add(1, ordering: .relaxed).newValue
                if count > 1 || Signals.exitAtOnce.load(ordering: .relaxed) {
                    wsp_die_of_signal(number)
                }
                Signals.pending.store(number, ordering: .relaxed)
                if Signals.wakeFD >= 0 { wsp_eventfd_signal(Signals.wakeFD) }
            }
        }
    }

    /// SIGWINCH came (the console's window changed size): the loop is woken to redraw.
    static let resized = Atomic<Bool>(false)

    /// The console's SIGWINCH handler (installed only when wspipe is a console).
    static func watchResize() {
        _ = wsp_signal(SIGWINCH) { _ in
            Signals.resized.store(true, ordering: .relaxed)
            if Signals.wakeFD >= 0 { wsp_eventfd_signal(Signals.wakeFD) }
        }
    }

    /// The signal received since the last call, if any.
    static func take() -> Int32? {
        let number = pending.exchange(0, ordering: .relaxed)
        return number == 0 ? nil : number
    }
}

/// The process's last step when a run has ended (its output written, `--stats` printed):
/// if SIGINT, SIGTERM or SIGHUP stopped it, the process dies of that signal (a shell shows
/// 128 + N; `_exit(128 + N)` only if raising it returns), whatever mode ran. Otherwise it
/// returns, and the caller exits with the run's status.
public func dieOfSignalIfStopped() {
    let number = Signals.first.load(ordering: .relaxed)
    guard number != 0 else { return }
    fflush(nil)
    wsp_die_of_signal(number)
}
