// swift-tools-version:6.2
// 6.2: SwiftPM accepts the unsafeFlags of library targets (WebSocketEngine, WSKit) in a
// version-resolved dependency (`.package(url:, from:)`) only from a 6.2 manifest on; with
// 6.0 or 6.1 it refuses ("contains unsafe build flags") and `make consumer-check` fails.
// WSKit needs a 6.2 compiler anyway (nonisolated(nonsending)). What each flag buys:
// docs/PERFORMANCE.md, "Unsafe flags".
// wspipe: a WebSocket <-> stdio bridge. Layers, bottom up:
//   WebSocketCore       sans-I/O RFC 6455 protocol (frames, handshake, UTF-8, close codes)
//   WebSocketTransport  TCP and TLS (system OpenSSL) byte streams, deadlines, poll
//   WebSocketEngine     the epoll event loop and the connection driver (either role)
//   WebSocketExec       a child process per connection (beside the engine)
//   WSPipeBridge        stdin/stdout <-> messages (the stdio face), exit statuses, error reports
//   WSPipeCLI           options (one table), --help, wspipeMain
//   wspipe              main.swift
import PackageDescription

// The release link lays out the functions a client session runs side by side (link/wspipe.order,
// made by scripts/order-functions).
let packageRoot = String(#filePath.dropLast("/Package.swift".count))

let package = Package(
    name: "wspipe",
    products: [
        .executable(name: "wspipe", targets: ["wspipe"]),
        .library(name: "WebSocketCore", targets: ["WebSocketCore"]),
        .library(name: "WebSocketTransport", targets: ["WebSocketTransport"]),
        .library(name: "WebSocketEngine", targets: ["WebSocketEngine"]),
        // The Swift API: async/await client over the engine (no Foundation).
        .library(name: "WSKit", targets: ["WSKit"]),
        // Opt-in: the URLSessionWebSocketTask shape (Foundation's URL, Data, URLRequest).
        .library(name: "WSKitFoundation", targets: ["WSKitFoundation"]),
        .library(name: "WebSocketExec", targets: ["WebSocketExec"]),
    ],
    targets: [
        // Syscalls the Glibc module does not import (getrandom, eventfd).
        .target(name: "CWSPipeShims", path: "Sources/CWSPipeShims"),
        // OpenSSL's headers (libssl-dev). Not linked: CTLSShims loads libssl.so.3 with
        // dlopen only for wss://, keeping OpenSSL off the ws:// path entirely.
        .systemLibrary(
            name: "COpenSSL",
            path: "Sources/COpenSSL",
            providers: [.apt(["libssl-dev"])]
        ),
        // Loads OpenSSL at run time and wraps the calls the TLS layer makes, including the
        // macros Swift cannot import (SSL_set_tlsext_host_name and friends).
        .target(
            name: "CTLSShims",
            dependencies: ["COpenSSL"],
            path: "Sources/CTLSShims",
            linkerSettings: [.linkedLibrary("dl")]
        ),
        // zlib (zlib1g-dev headers) for permessage-deflate and --decompress, loaded with
        // dlopen on first use: a session that compresses nothing never maps libz.
        .target(
            name: "CZlibShims",
            path: "Sources/CZlibShims",
            linkerSettings: [.linkedLibrary("dl")]
        ),
        // No unsafe flags: with exclusivity checks off and cross-module optimisation on, as
        // the engine's, the CLI's instruction counts were the same (docs/PERFORMANCE.md).
        .target(
            name: "WebSocketCore",
            dependencies: ["CWSPipeShims"]
        ),
        .target(
            name: "WebSocketTransport",
            dependencies: ["WebSocketCore", "COpenSSL", "CTLSShims", "CWSPipeShims"]
        ),
        .target(
            name: "WebSocketEngine",
            dependencies: ["WebSocketCore", "WebSocketTransport", "CWSPipeShims", "CZlibShims"],
            // The engine runs on one thread: Swift's run-time exclusivity checks can never
            // fire here, and with them a stdin line sent costs 72 % more instructions (845
            // instead of 492, scripts/profile), a small message sent through WSKit about 30 %
            // more CPU. Cross-module optimisation: no change in the CLI's counts.
            swiftSettings: [.unsafeFlags(["-enforce-exclusivity=unchecked", "-cross-module-optimization"], .when(configuration: .release))]
        ),
        // A child process per connection (websocketd's core): spawn, pipes, reaping, the
        // CGI environment, the messages <-> child bridge. Beside the engine, below the faces.
        .target(
            name: "WebSocketExec",
            dependencies: ["WebSocketEngine", "WebSocketCore", "WebSocketTransport", "CWSPipeShims"]
        ),
        // The message bus of --broadcast --bus: the client side of Redis's RESP (sans-I/O
        // parser and encoder) and its pub/sub session on the engine's loop.
        .target(
            name: "WSPipeBus",
            dependencies: ["WebSocketEngine", "WebSocketTransport", "WebSocketCore", "CWSPipeShims"]
        ),
        .target(
            name: "WSPipeBridge",
            dependencies: ["WebSocketCore", "WebSocketTransport", "WebSocketEngine", "WebSocketExec", "WSPipeBus", "CWSPipeShims"],
            // The engine runs on one thread: Swift's run-time exclusivity checks cost 15% of
            // the instructions per small message (callgrind) and can never fire here.
            swiftSettings: [.unsafeFlags(["-enforce-exclusivity=unchecked", "-cross-module-optimization"], .when(configuration: .release))]
        ),
        .target(
            name: "WSPipeCLI",
            dependencies: ["WSPipeBridge", "WSPipeBus", "WebSocketCore", "WebSocketTransport", "WebSocketEngine", "WebSocketExec", "CWSPipeShims"]
        ),
        .executableTarget(
            name: "wspipe",
            dependencies: ["WSPipeCLI"],
            // Release: link with the toolchain's lld and pack the ~25,000 relative
            // relocations as RELR (glibc >= 2.36). With gold's RELA table the loader reads
            // 600 KB of relocations and dirties every page they patch at each start: about
            // 0.55 MiB of peak RSS for every run (docs/PERFORMANCE.md). Needs glibc >= 2.36.
            // --no-export-dynamic undoes the -export-dynamic of the toolchain's
            // static-stdlib-args.lnk: every public symbol of our modules (4,050) went into
            // .dynsym/.dynstr (340 KB), read at each start (~0.3 MiB of file-backed RSS), and
            // nothing loads symbols from the executable (dlopen'd OpenSSL and zlib do not).
            // The symbol ordering puts the ~1,060 functions a ws:// session executes (470 KB)
            // first in .text: the kernel maps text in 64 KiB windows around each fault, and
            // scattered over 6.4 MB they made 4.2 MiB resident; grouped, 2.6 MiB.
            linkerSettings: [
                .unsafeFlags(["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
                              "-Xlinker", "--no-export-dynamic",
                              "-Xlinker", "--symbol-ordering-file=\(packageRoot)/link/wspipe.order",
                              "-Xlinker", "--no-warn-symbol-ordering"],
                             .when(configuration: .release))
            ]
        ),
        // The library face: WebSocket.connect, send, messages (no Foundation).
        .target(
            name: "WSKit",
            dependencies: ["WebSocketEngine", "WebSocketTransport", "WebSocketCore", "CWSPipeShims"],
            // Lets a program's module inline WSKit's calls; its effect was within the noise of
            // wall-clock runs on a shared machine (docs/PERFORMANCE.md).
            swiftSettings: [.unsafeFlags(["-cross-module-optimization"], .when(configuration: .release))]
        ),
        // URLSessionWebSocketTask's names and semantics over WSKit (imports Foundation).
        .target(
            name: "WSKitFoundation",
            dependencies: ["WSKit"]
        ),
        // examples/swift: WSKit programs (built with the project, run by WSKitTests).
        .executableTarget(name: "echo-chat", dependencies: ["WSKit"], path: "examples/swift/EchoChat"),
        .executableTarget(name: "ticker", dependencies: ["WSKit"], path: "examples/swift/Ticker"),
        .executableTarget(name: "broadcast-server", dependencies: ["WSKit"], path: "examples/swift/BroadcastServer"),
        .executableTarget(name: "chat-manager", dependencies: ["WSKitFoundation"], path: "examples/swift/ChatManager"),
        // scripts/bench-api: throughput and allocations through WSKit (not installed).
        .executableTarget(name: "wskit-bench", dependencies: ["WSKit"], path: "bench/swift/WSKitBench"),
        // Callback echoes through WSKitFoundation's WebSocketTask (not installed).
        .executableTarget(name: "wskit-task-bench", dependencies: ["WSKitFoundation"], path: "bench/swift/TaskBench"),
        // scripts/bench-idle: the engine's memory per idle connection (not installed).
        .executableTarget(
            name: "EngineIdleBench",
            dependencies: ["WebSocketEngine", "WebSocketTransport", "WebSocketCore"]
        ),
        // Helpers every test target shares: child processes, where things are, the Python
        // peers, TLS material made at run time, loopback sockets, hand-built frames.
        // Foundation only (no XCTest), so it also builds in `swift build`.
        .target(
            name: "TestSupport",
            path: "Tests/TestSupport"
        ),
        // The engine-level helpers of the test targets that run drivers and framers: the
        // delegate and sink recorders, a socketpair of streams, turning a loop until a
        // condition holds (TestSupport cannot see the engine).
        .target(
            name: "EngineTestSupport",
            dependencies: ["WebSocketEngine", "WebSocketTransport", "WebSocketCore"],
            path: "Tests/EngineTestSupport"
        ),
        .testTarget(
            name: "WebSocketCoreTests",
            dependencies: ["WebSocketCore", "TestSupport"]
        ),
        .testTarget(
            name: "WebSocketTransportTests",
            dependencies: ["WebSocketTransport", "WebSocketCore", "TestSupport"]
        ),
        .testTarget(
            name: "WebSocketEngineTests",
            dependencies: ["WebSocketEngine", "WebSocketTransport", "WebSocketCore", "TestSupport", "EngineTestSupport"]
        ),
        .testTarget(
            name: "WebSocketExecTests",
            dependencies: ["WebSocketExec", "WebSocketEngine", "WebSocketTransport", "WebSocketCore", "TestSupport", "EngineTestSupport"]
        ),
        .testTarget(
            name: "WSPipeBridgeTests",
            dependencies: ["WSPipeBridge", "WSPipeCLI", "WSPipeBus", "WebSocketEngine", "WebSocketTransport", "TestSupport", "EngineTestSupport"]
        ),
        .testTarget(
            name: "WSKitTests",
            dependencies: ["WSKit", "WSKitFoundation", "TestSupport"]
        ),
        .testTarget(
            name: "IntegrationTests",
            dependencies: ["wspipe", "TestSupport"],
            exclude: ["peers"]
        ),
    ]
)
