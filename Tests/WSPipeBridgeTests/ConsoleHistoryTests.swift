import Foundation
import XCTest
@testable import WSPipeBridge

final class ConsoleHistoryTests: XCTestCase {
    private var root = ""

    override func setUpWithError() throws {
        root = NSTemporaryDirectory() + "wspipe-history-\(getpid())-\(UUID().uuidString.prefix(8))"
        XCTAssertEqual(mkdir(root, 0o700), 0)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: root)
    }

    private func mode(_ path: String) -> mode_t {
        var status = stat()
        XCTAssertEqual(lstat(path, &status), 0, path)
        return status.st_mode & 0o7777
    }

    private func contents(_ path: String) -> String {
        (try? String(contentsOfFile: path, encoding: .utf8)) ?? "<unreadable>"
    }

    func testPathFromTheEnvironment() {
        XCTAssertEqual(ConsoleHistory.defaultPath(environment: ["HOME": "/home/u"]), "/home/u/.local/state/wspipe/history")
        XCTAssertEqual(ConsoleHistory.defaultPath(environment: ["HOME": "/home/u", "XDG_STATE_HOME": "/s/"]), "/s/wspipe/history")
        XCTAssertEqual(ConsoleHistory.defaultPath(environment: ["HOME": "/home/u", "XDG_STATE_HOME": "rel"]), "/home/u/.local/state/wspipe/history",
                       "a relative XDG_STATE_HOME is ignored, as the XDG spec says")
        XCTAssertNil(ConsoleHistory.defaultPath(environment: [:]))
        var none = ConsoleHistory(environment: ["XDG_STATE_HOME": "relative"])
        let (entries, warnings) = none.load()
        XCTAssertEqual(entries, [])
        XCTAssertEqual(warnings.count, 1)
        XCTAssertTrue(warnings[0].contains("no history"), warnings[0])
        XCTAssertEqual(none.append("x"), [], "one warning only")
        XCTAssertEqual(none.load().warnings, [])
    }

    func testCreatesPrivateDirectoriesAndFileAndReadsBack() {
        var history = ConsoleHistory(environment: ["HOME": root])
        XCTAssertEqual(history.load().warnings, [])
        XCTAssertEqual(mode(root + "/.local"), 0o700 & ~currentUmask())
        XCTAssertEqual(mode(root + "/.local/state/wspipe"), 0o700 & ~currentUmask())
        XCTAssertEqual(mode(root + "/.local/state/wspipe/history"), 0o600 & ~currentUmask())
        XCTAssertEqual(history.append("first"), [])
        XCTAssertEqual(history.append("two\nlines \\n"), [])
        XCTAssertEqual(history.append(" secret"), [], "a line beginning with a space is not saved")
        XCTAssertEqual(history.append(""), [])
        XCTAssertEqual(history.append(String(repeating: "x", count: 4097)), [], "over 4 KiB: not saved")
        XCTAssertEqual(history.append(String(repeating: "y", count: 4096)), [])
        XCTAssertEqual(contents(root + "/.local/state/wspipe/history"),
                       "first\ntwo\\nlines \\\\n\n" + String(repeating: "y", count: 4096) + "\n", "one entry per line, escaped")
        var again = ConsoleHistory(environment: ["HOME": root])
        XCTAssertEqual(again.load().entries, ["first", "two\nlines \\n", String(repeating: "y", count: 4096)])
    }

    private func currentUmask() -> mode_t {
        let mask = umask(0o022)
        umask(mask)
        return mask
    }

    func testSymbolicLinkIsRefusedWithOneWarning() {
        let target = root + "/elsewhere"
        FileManager.default.createFile(atPath: target, contents: Data("kept\n".utf8))
        XCTAssertEqual(symlink(target, root + "/history"), 0)
        var history = ConsoleHistory(path: root + "/history")
        let (entries, warnings) = history.load()
        XCTAssertEqual(entries, [])
        XCTAssertEqual(warnings.count, 1)
        XCTAssertTrue(warnings[0].contains("symbolic link"), warnings[0])
        XCTAssertTrue(history.isDisabled)
        XCTAssertEqual(history.append("leak"), [], "no second warning")
        XCTAssertEqual(contents(target), "kept\n", "the link's target is never written")
    }

    func testGroupOrWorldWritableAndForeignFilesAreRefused() throws {
        let path = root + "/history"
        FileManager.default.createFile(atPath: path, contents: Data("a\n".utf8))
        chmod(path, 0o620)
        var writable = ConsoleHistory(path: path)
        let warnings = writable.load().warnings
        XCTAssertEqual(warnings.count, 1)
        XCTAssertTrue(warnings[0].contains("writable by group or others"), "\(warnings)")
        chmod(path, 0o600)

        let directory = root + "/open"
        XCTAssertEqual(mkdir(directory, 0o777), 0)
        chmod(directory, 0o777)
        var inOpenDirectory = ConsoleHistory(path: directory + "/history")
        XCTAssertTrue(inOpenDirectory.load().warnings.first?.contains("directory") ?? false)

        guard geteuid() == 0 else { throw XCTSkip("changing a file's owner needs root") }
        XCTAssertEqual(chown(path, 4321, 4321), 0)
        var foreign = ConsoleHistory(path: path)
        let foreignWarnings = foreign.load().warnings
        XCTAssertEqual(foreignWarnings.count, 1)
        XCTAssertTrue(foreignWarnings[0].contains("belongs to uid 4321"), "\(foreignWarnings)")
    }

    func testNotARegularFileIsRefused() {
        XCTAssertEqual(mkfifo(root + "/history", 0o600), 0)
        var history = ConsoleHistory(path: root + "/history")
        let warnings = history.load().warnings
        XCTAssertEqual(warnings.count, 1)
        XCTAssertTrue(warnings[0].contains("not a regular file"), "\(warnings)")
    }

    func testBoundedToTheLastEntries() {
        let path = root + "/history"
        var history = ConsoleHistory(path: path, maximumEntries: 10)
        _ = history.load()
        for n in 0..<15 { XCTAssertEqual(history.append("line \(n)"), []) }
        XCTAssertEqual(contents(path).split(separator: "\n").count, 15, "appends grow the file up to half as much again")
        XCTAssertEqual(history.append("line 15"), [])
        XCTAssertEqual(contents(path).split(separator: "\n").count, 10, "then it is trimmed to the last entries")
        var reader = ConsoleHistory(path: path, maximumEntries: 5)
        XCTAssertEqual(reader.load().entries, (11...15).map { "line \($0)" })
    }

    func testTwoConsolesAppendWholeLines() {
        let path = root + "/history"
        let line = String(repeating: "z", count: 4000)
        DispatchQueue.concurrentPerform(iterations: 2) { console in
            var history = ConsoleHistory(path: path, maximumEntries: 1000)
            for n in 0..<200 { XCTAssertEqual(history.append("\(console) \(n) " + line), []) }
        }
        let lines = contents(path).split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        XCTAssertEqual(lines.count, 400)
        for console in 0..<2 {
            let mine = lines.filter { $0.hasPrefix("\(console) ") }
            XCTAssertEqual(mine.map { String($0) }, (0..<200).map { "\(console) \($0) " + line }, "whole lines, in order")
        }
    }

    func testAppendWaitsForAnotherConsolesLock() throws {
        let path = root + "/history"
        var loaded = ConsoleHistory(path: path)
        XCTAssertEqual(loaded.load().warnings, [])
        let history = loaded
        // Another console in the middle of trimming the file holds the lock.
        let other = open(path, O_RDWR | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(other, 0)
        defer { close(other) }
        XCTAssertEqual(flock(other, LOCK_EX), 0)
        let appended = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            var mine = history
            XCTAssertEqual(mine.append("waited"), [])
            appended.signal()
        }
        XCTAssertEqual(appended.wait(timeout: .now() + 0.3), .timedOut, "the append waits for the lock")
        XCTAssertEqual(contents(path), "")
        XCTAssertEqual(flock(other, LOCK_UN), 0)
        XCTAssertEqual(appended.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(contents(path), "waited\n")
    }

    func testGarbageFileLoads() throws {
        let path = root + "/history"
        var bytes: [UInt8] = []
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<100_000 { bytes.append(generator.next()) }
        bytes += Array("\nlast good\\x\\\n".utf8)
        FileManager.default.createFile(atPath: path, contents: Data(bytes), attributes: [.posixPermissions: 0o600])
        var history = ConsoleHistory(path: path)
        let (entries, warnings) = history.load()
        XCTAssertEqual(warnings, [])
        XCTAssertEqual(entries.last, "last good\\x\\", "an unknown escape and a trailing backslash are kept as they are")
        XCTAssertTrue(entries.allSatisfy { !$0.isEmpty && $0.utf8.count <= 4096 })
        XCTAssertEqual(history.append("after"), [])
    }

    func testEscaping() {
        for entry in ["plain", "a\nb", "c\r\nd", "back\\slash", "\\n literal", "\\", "\n", "ü\\\n"] {
            let escaped = ConsoleHistory.escape(entry)
            XCTAssertFalse(escaped.contains("\n") || escaped.contains("\r"))
            XCTAssertEqual(ConsoleHistory.unescape(escaped), entry)
        }
    }
}
