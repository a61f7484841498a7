import CWSPipeShims
import Glibc

/// An eventfd the session's poll loop watches; signal handlers poke it (writing to an
/// eventfd is async-signal-safe) so a signal ends the wait at once.
final class Wakeup: @unchecked Sendable {
    let fd: Int32

    init?() {
        fd = wsp_eventfd()
        if fd < 0 { return nil }
    }

    deinit { Glibc.close(fd) }

    func drain() { _ = wsp_eventfd_drain(fd) }
}
