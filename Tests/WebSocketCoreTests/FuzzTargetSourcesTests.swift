import Foundation
import XCTest

/// fuzz/run compiles each harness with the core and a few other files into one module named
/// WebSocketCore, with no other module of the package: a file it takes that imports one
/// unconditionally breaks that target's build (twice: `match` importing the bridge, `bus`
/// the transport), which nothing else runs. Such imports go under `#if canImport(...)`.
final class FuzzTargetSourcesTests: XCTestCase {
    /// What the fuzz build has: the toolchain's, the core itself, and the shims' module maps.
    private let available: Set<String> = ["Glibc", "Synchronization", "WebSocketCore", "CWSPipeShims", "CZlibShims"]

    func testTheFuzzTargetsSourcesImportOnlyWhatTheFuzzBuildHas() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let script = try String(contentsOf: root.appendingPathComponent("fuzz/run"), encoding: .utf8)
        let listed = script.split(whereSeparator: { " \t\n\"'$(){};".contains($0) })
            .filter { $0.hasPrefix("Sources/") && $0.hasSuffix(".swift") && !$0.contains("*") }.map(String.init)
        let core = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("Sources/WebSocketCore").path)
            .filter { $0.hasSuffix(".swift") }.map { "Sources/WebSocketCore/" + $0 }
        XCTAssertGreaterThan(listed.count, 10, "the file lists of fuzz/run were not found")
        for file in Set(listed + core).sorted() {
            let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
            var depth = 0  // inside #if canImport(...)
            for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                if trimmed.hasPrefix("#if canImport(") { depth += 1 } else if trimmed.hasPrefix("#endif"), depth > 0 { depth -= 1 }
                guard depth == 0, trimmed.hasPrefix("import ") else { continue }
                let module = String(trimmed.dropFirst("import ".count).prefix { $0.isLetter || $0.isNumber || $0 == "_" })
                XCTAssertTrue(available.contains(module), "\(file) imports \(module), which fuzz/run's one-module build lacks")
            }
        }
    }
}
