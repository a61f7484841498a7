import CWSPipeShims
import Glibc

/// An eventfd the network thread polls; the stdin and stdout threads and signal handlers
/// poke it when they have something for it.
final class Wakeup: @unchecked Sendable {
    let fd: Int32

    init?() {
        fd = wsp_eventfd()
        if fd < 0 { return nil }
    }

    deinit { Glibc.close(fd) }

    func signal() { wsp_eventfd_signal(fd) }
    func drain() { _ = wsp_eventfd_drain(fd) }
}
