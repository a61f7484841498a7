// The programs and files the tests take from scripts/setup, and the one rule for a missing
// one: the test skips with one line, except under CI=true, where it fails, so that a run
// which should exercise everything cannot pass with a feature unrun. Skips the machine
// forces (root, no ::1, descriptor limits) are plain XCTSkips, listed in CONTRIBUTING.md.
import Foundation
import XCTest

package struct Tool: Sendable {
    /// What the messages call it.
    package let name: String
    /// Where it may be; the first that exists is used.
    package let candidates: [String]
    /// The Debian package scripts/setup installs it from.
    package let package: String

    package init(_ name: String, _ candidates: [String], package: String) {
        self.name = name
        self.candidates = candidates
        self.package = package
    }

    package static let bash = Tool("bash", ["/bin/bash", "/usr/bin/bash"], package: "bash")
    package static let zsh = Tool("zsh", ["/usr/bin/zsh", "/bin/zsh"], package: "zsh")
    package static let make = Tool("make", ["/usr/bin/make", "/bin/make"], package: "make")
    package static let man = Tool("man", ["/usr/bin/man", "/bin/man"], package: "man-db")
    package static let groff = Tool("groff", ["/usr/bin/groff", "/bin/groff"], package: "groff-base")
    package static let websocketd = Tool("websocketd", ["/usr/bin/websocketd", "/usr/local/bin/websocketd"], package: "websocketd")
    package static let systemdSocketActivate = Tool("systemd-socket-activate", ["/usr/bin/systemd-socket-activate"], package: "systemd")
    package static let systemdAnalyze = Tool("systemd-analyze", ["/usr/bin/systemd-analyze"], package: "systemd")
    package static let redisServer = Tool("redis-server", ["/usr/bin/redis-server"], package: "redis-server")
    package static let redisCLI = Tool("redis-cli", ["/usr/bin/redis-cli"], package: "redis-tools")
    /// Debian installs it in /usr/sbin.
    package static let natsServer = Tool("nats-server", ["/usr/sbin/nats-server", "/usr/bin/nats-server"], package: "nats-server")
    package static let node = Tool("node", ["/usr/bin/node", "/usr/bin/nodejs"], package: "nodejs")
    /// The Node `ws` module (a directory for `require`).
    package static let nodeWS = Tool("node-ws", ["/usr/share/nodejs/ws"], package: "node-ws")
    /// peers/browser.py finds it on PATH itself and exits 77 without it: see `absence`.
    package static let chromium = Tool("chromium", ["/usr/bin/chromium"], package: "chromium")
    package static let socat = Tool("socat", ["/usr/bin/socat"], package: "socat")
    /// A terminal that wraps its rows again when narrowed (the console's resize test).
    package static let tmux = Tool("tmux", ["/usr/bin/tmux"], package: "tmux")
    package static let ip = Tool("ip", ["/usr/sbin/ip", "/sbin/ip", "/bin/ip"], package: "iproute2")
    package static let setpriv = Tool("setpriv", ["/usr/bin/setpriv"], package: "util-linux")
    /// Debian installs both in /usr/sbin.
    package static let haproxy = Tool("haproxy", ["/usr/sbin/haproxy", "/usr/bin/haproxy"], package: "haproxy")
    package static let nginx = Tool("nginx", ["/usr/sbin/nginx", "/usr/bin/nginx"], package: "nginx")

    /// Where it is installed; when it is not, the skip or (under CI=true) failure `absence` gives.
    package func path(environment: [String: String] = ProcessInfo.processInfo.environment,
                      file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let files = FileManager.default
        for candidate in candidates {
            var isDirectory: ObjCBool = false
            guard files.fileExists(atPath: candidate, isDirectory: &isDirectory) else { continue }
            if isDirectory.boolValue || files.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw absence(environment: environment, file: file, line: line)
    }

    /// What a test throws when the tool is missing: an XCTSkip, or under CI=true an error,
    /// which XCTest records as a failure.
    package func absence(environment: [String: String] = ProcessInfo.processInfo.environment,
                         file: StaticString = #filePath, line: UInt = #line) -> Error {
        let what = "\(name) is not installed (scripts/setup installs it: apt \(package))"
        if CI.isOn(environment) { return MissingToolError(description: what + ", and CI=true makes a missing tool a failure") }
        return XCTSkip(what, file: file, line: line)
    }

    /// Node and its `ws` module, for the tests that run a Node peer.
    package static func nodeWithWS(file: StaticString = #filePath, line: UInt = #line) throws -> (node: String, ws: String) {
        (try node.path(file: file, line: line), try nodeWS.path(file: file, line: line))
    }
}

package enum CI {
    /// CI=true (or 1), as CI services set it.
    package static func isOn(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        guard let value = environment["CI"]?.lowercased() else { return false }
        return value == "true" || value == "1"
    }
}

package struct MissingToolError: Error, CustomStringConvertible {
    package let description: String
    package init(description: String) { self.description = description }
}

/// A skip the machine forces, never a failure (CI=true or not): no socket binds to ::1.
package func requireIPv6Loopback(file: StaticString = #filePath, line: UInt = #line) throws {
    guard ipv6LoopbackAvailable() else {
        throw XCTSkip("this machine has no IPv6 loopback (cannot bind a socket to ::1)", file: file, line: line)
    }
}
