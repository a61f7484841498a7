// Keeps completions/wspipe.bash and completions/_wspipe (zsh) in step with the code:
// every option in `Option.allCases` must be offered by both (long and short name), with
// a value for exactly the options that take one, and neither may offer an option that
// does not exist. When bash (and zsh) are installed, the files are also run.
import Foundation
import XCTest
import TestSupport
@testable import WSPipeBridge
@testable import WSPipeCLI

final class CompletionTests: XCTestCase {
    private static let root = URL(fileURLWithPath: Locations.packageRoot)
    private static let bashFile = root.appendingPathComponent("completions/wspipe.bash").path
    private static let zshFile = root.appendingPathComponent("completions/_wspipe").path

    private func source(_ path: String) throws -> String {
        do {
            return try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            XCTFail("cannot read \(path): \(error)")
            throw error
        }
    }

    /// `--name` words in `text` (lowercase names only).
    private func longNames(in text: String) -> Set<String> {
        let regex = try! NSRegularExpression(pattern: #"(?<![A-Za-z0-9-])--[a-z][a-z0-9-]*"#)
        let range = NSRange(text.startIndex..., in: text)
        return Set(regex.matches(in: text, range: range).compactMap { Range($0.range, in: text).map { String(text[$0]) } })
    }

    // MARK: - Both files mention every option, and only real ones

    func testBashCompletionOffersEveryOption() throws {
        let text = try source(Self.bashFile)
        let names = longNames(in: text)
        for option in Option.allCases {
            XCTAssertTrue(names.contains(option.longName), "completions/wspipe.bash lacks \(option.longName)")
            if let short = option.shortName {
                XCTAssertTrue(text.contains(" -\(short) ") || text.contains("\"-\(short) ") || text.contains("|-\(short)|")
                              || text.contains(" -\(short)|") || text.contains("\n        -\(short) "),
                              "completions/wspipe.bash lacks -\(short)")
            }
        }
        let known = Set(Option.allCases.map(\.longName))
        for name in names.subtracting(known) {
            XCTFail("completions/wspipe.bash offers \(name), which is not an option")
        }
    }

    /// bash's two lists: `flags` (no value) and `valued`; each option in the right one.
    func testBashCompletionListsFlagsAndValuedOptionsApart() throws {
        let text = try source(Self.bashFile)
        func list(_ name: String) throws -> [String] {
            let start = try XCTUnwrap(text.range(of: "local \(name)=\""), "no '\(name)' list in completions/wspipe.bash")
            let end = try XCTUnwrap(text[start.upperBound...].firstIndex(of: "\""))
            return text[start.upperBound..<end].split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init)
        }
        for (listName, valued) in [("flags", false), ("valued", true)] {
            for name in try list(listName) {
                let option = name.hasPrefix("--") ? Option.named(name) : name.count == 2 ? Option.named(short: name.last!) : nil
                let found = try XCTUnwrap(option, "completions/wspipe.bash: '\(name)' in \(listName) is not an option")
                XCTAssertEqual(found.takesValue, valued, "completions/wspipe.bash: \(name) is in \(listName)")
            }
        }
    }

    func testZshCompletionOffersEveryOptionWithItsValue() throws {
        let text = try source(Self.zshFile)
        let names = longNames(in: text)
        for option in Option.allCases {
            XCTAssertTrue(names.contains(option.longName), "completions/_wspipe lacks \(option.longName)")
            // _arguments: "--name=" (or "-x+") declares a value; a flag has none. --help's
            // is optional: a category (checked below).
            let declaresValue = text.contains("\(option.longName)=")
            let valued = option.takesValue || option.action.isHelp
            XCTAssertEqual(declaresValue, valued,
                           "completions/_wspipe: \(option.longName) \(valued ? "needs" : "takes no") value")
            if let short = option.shortName {
                let spec = valued ? "-\(short)+," : "-\(short),"
                XCTAssertTrue(text.contains("{\(spec)"), "completions/_wspipe lacks -\(short) (as {\(spec)...})")
            }
        }
        let known = Set(Option.allCases.map(\.longName))
        for name in names.subtracting(known) {
            XCTFail("completions/_wspipe offers \(name), which is not an option")
        }
        XCTAssertTrue(text.hasPrefix("#compdef wspipe\n"), "zsh needs the #compdef line first")
    }

    /// Both files complete --help's word with exactly the categories (and all).
    func testBothFilesOfferTheHelpCategories() throws {
        let expected = ["all"] + Option.Category.allCases.map(\.rawValue)
        let bash = try source(Self.bashFile)
        let start = try XCTUnwrap(bash.range(of: "-h|--help)"), "completions/wspipe.bash has no case for --help")
        let words = try XCTUnwrap(bash[start.upperBound...].range(of: "compgen -W \""))
        let end = try XCTUnwrap(bash[words.upperBound...].firstIndex(of: "\""))
        XCTAssertEqual(bash[words.upperBound..<end].split(separator: " ").map(String.init), expected, "completions/wspipe.bash")
        let zsh = try source(Self.zshFile)
        let spec = try XCTUnwrap(zsh.range(of: "::CATEGORY:("), "completions/_wspipe: --help takes no CATEGORY")
        let close = try XCTUnwrap(zsh[spec.upperBound...].firstIndex(of: ")"))
        XCTAssertEqual(zsh[spec.upperBound..<close].split(separator: " ").map(String.init), expected, "completions/_wspipe")
        if FileManager.default.isExecutableFile(atPath: "/bin/bash") {
            XCTAssertEqual(try bashComplete(["wspipe", "--help", "t"]), ["tls"])
            XCTAssertEqual(try bashComplete(["wspipe", "-h", "se"]), ["server"])
        }
    }

    // MARK: - Running them

    private func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.currentDirectoryURL = Self.root
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// What bash's completion offers for the words (the last one being completed).
    private func bashComplete(_ words: [String]) throws -> [String] {
        let quoted = words.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        let script = """
            source "$1" || exit 9
            COMP_WORDS=(\(quoted)); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
            _wspipe
            printf '%s\\n' "${COMPREPLY[@]}"
            """
        let result = try run(try Tool.bash.path(), ["-c", script, "bash", Self.bashFile])
        XCTAssertEqual(result.status, 0, result.output)
        return result.output.split(separator: "\n").map(String.init)
    }

    func testBashCompletionRuns() throws {
        let offered = Set(try bashComplete(["wspipe", "-"]))
        let expected = Set(Option.allCases.map(\.longName) + Option.allCases.compactMap { $0.shortName.map { "-\($0)" } })
        XCTAssertEqual(offered, expected, "completing '-' offers exactly the options")

        XCTAssertEqual(try bashComplete(["wspipe", "--jso"]), ["--jsonl"])
        XCTAssertEqual(try bashComplete(["wspipe", "--idle"]), ["--idle-timeout"])
        // After an option that takes a value: values, never options.
        for option in Option.allCases where option.takesValue {
            let values = try bashComplete(["wspipe", option.longName, ""])
            XCTAssertFalse(values.contains { $0.hasPrefix("-") }, "\(option.longName) is followed by a value: \(values)")
        }
        XCTAssertTrue(try bashComplete(["wspipe", "--close-code", "100"]).contains("1000"))
        XCTAssertTrue(try bashComplete(["wspipe", "--timeout=1"]).contains("1"))
        // Files for --cacert and --bearer-file.
        XCTAssertTrue(try bashComplete(["wspipe", "--cacert", "Pack"]).contains("Package.swift"))
        XCTAssertTrue(try bashComplete(["wspipe", "--bearer-file", "Pack"]).contains("Package.swift"))
        // The URL.
        XCTAssertTrue(try bashComplete(["wspipe", "-v", "ws"]).contains("wss://"))
    }

    func testZshCompletionParses() throws {
        let zsh = try Tool.zsh.path()
        let result = try run(zsh, ["-n", Self.zshFile])
        XCTAssertEqual(result.status, 0, "zsh -n completions/_wspipe: \(result.output)")
    }
}
