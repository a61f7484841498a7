// `make install` and `make uninstall` into a DESTDIR: the four files land where the README
// says with the right modes, uninstall removes exactly them, and install never builds
// (a stand-in binary is given with BIN=, so this runs without a release build).
import Foundation
import XCTest
import TestSupport

final class InstallTests: XCTestCase {
    private let installed = [
        ("usr/bin/wspipe", 0o755, nil as String?),
        ("usr/share/man/man1/wspipe.1", 0o644, "man/wspipe.1"),
        ("usr/share/bash-completion/completions/wspipe", 0o644, "completions/wspipe.bash"),
        ("usr/share/zsh/site-functions/_wspipe", 0o644, "completions/_wspipe"),
    ]

    private func make(_ arguments: [String]) throws -> RunResult {
        let make = try Tool.make.path()
        let child = try ChildProcess(executable: make, arguments: ["-s", "-C", Locations.packageRoot] + arguments,
                                     environment: Locations.baseEnvironment)
        return child.wait(timeout: 30)
    }

    /// Every regular file under `directory`, relative to it.
    private func files(under directory: String) -> [String] {
        let enumerator = FileManager.default.enumerator(atPath: directory)
        var found: [String] = []
        while let path = enumerator?.nextObject() as? String {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: directory + "/" + path, isDirectory: &isDirectory), !isDirectory.boolValue {
                found.append(path)
            }
        }
        return found.sorted()
    }

    func testInstallAndUninstallIntoDestdir() throws {
        let root = NSTemporaryDirectory() + "wspipe-install-\(getpid())-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let destdir = root + "/dest"
        let binary = root + "/wspipe-standin"
        try "#!/bin/sh\necho stand-in\n".write(toFile: binary, atomically: false, encoding: .utf8)
        chmod(binary, 0o700)

        let install = try make(["install", "DESTDIR=\(destdir)", "PREFIX=/usr", "BIN=\(binary)"])
        XCTAssertEqual(install.termination, .exited(0), "\(install)")
        XCTAssertEqual(files(under: destdir), installed.map(\.0).sorted(), "make install wrote other files")
        for (path, mode, source) in installed {
            let full = destdir + "/" + path
            let attributes = try FileManager.default.attributesOfItem(atPath: full)
            XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, mode, "mode of \(path)")
            let expected = try Data(contentsOf: URL(fileURLWithPath: source.map { Locations.packageRoot + "/" + $0 } ?? binary))
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: full)), expected, "content of \(path)")
        }

        let uninstall = try make(["uninstall", "DESTDIR=\(destdir)", "PREFIX=/usr"])
        XCTAssertEqual(uninstall.termination, .exited(0), "\(uninstall)")
        XCTAssertEqual(files(under: destdir), [], "make uninstall left files behind")
    }

    func testInstallWithoutTheBinaryFailsAndWritesNothing() throws {
        let destdir = NSTemporaryDirectory() + "wspipe-install-\(getpid())-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: destdir) }
        let result = try make(["install", "DESTDIR=\(destdir)", "PREFIX=/usr", "BIN=\(destdir)/no-such-binary"])
        XCTAssertNotEqual(result.termination, .exited(0), "\(result)")
        XCTAssertTrue(result.stderr.contains("run 'make build' first"), "\(result)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: destdir), "install wrote into DESTDIR without a binary")
    }
}
