// libFuzzer target `path`: RequestPath (the pure part) and BeneathResolver (openat2 or the
// O_NOFOLLOW walk) on a real tree made once in /tmp.
//
// Compiled into the WebSocketCore module with Sources/WebSocketTransport/BeneathResolver.swift
// (see fuzz/run).
//
// Input: byte 0 bit 0 set: the resolver walks with O_NOFOLLOW instead of openat2; the rest
// is a raw request target: RequestTarget's forms on it whole, then RequestPath and the
// resolvers on it cut at its "?".
//
// The tree: root/{x (executable), y.txt, .secret, fifo, a/b/prog (executable), a/loop ->
// ../a, out -> /…/outside/secret, up -> ../outside, in -> x}, and outside/secret beside root.
//
// Checks:
//   - RequestPath never crashes; an accepted path's segments are non-empty, hold no "/",
//     "\", NUL or control byte, are not "." or "..", do not start with "."; they equal an
//     independent once-decoding of the path split at its raw "/"; percent-encoding every
//     byte and parsing again gives the same segments
//   - whatever program(for:) or open(segments:) returns is an entry inside root: the
//     descriptor's /proc/self/fd link is root or below it, never outside/secret's inode;
//     a symbolic link on the path is always refused
import Glibc

final class Tree {
    let base: String
    let root: String
    let rootReal: String
    let secretInode: UInt64

    init() {
        var template = Array("/tmp/wspipe-fuzz-path-XXXXXX".utf8CString)
        base = String(cString: mkdtemp(&template)!)
        root = base + "/root"
        for directory in ["/root", "/root/a", "/root/a/b", "/outside"] { mkdir(base + directory, 0o755) }
        for (path, mode) in [("/root/x", 0o755), ("/root/y.txt", 0o644), ("/root/.secret", 0o755), ("/root/a/b/prog", 0o755),
                             ("/outside/secret", 0o755)] as [(String, mode_t)] {
            let fd = open(base + path, O_WRONLY | O_CREAT | O_TRUNC, mode)
            fchmod(fd, mode)
            close(fd)
        }
        symlink(base + "/outside/secret", root + "/out")
        symlink("../outside", root + "/up")
        symlink("x", root + "/in")
        symlink("../a", root + "/a/loop")
        mkfifo(root + "/fifo", 0o644)
        var info = stat()
        stat(base + "/outside/secret", &info)
        secretInode = UInt64(info.st_ino)
        let real = realpath(root, nil)!
        rootReal = String(cString: real)
        free(real)
    }
}

let tree = Tree()
// The tree goes when the fuzzer exits normally (a crash leaves it in /tmp for a look).
let removeTree: Void = { atexit { _ = system("rm -rf '\(tree.base)'") } }()
let resolvers = [try! BeneathResolver(directory: tree.root, mechanism: .openat2),
                 try! BeneathResolver(directory: tree.root, mechanism: .noFollowWalk)]

/// Where an open descriptor leads, from /proc.
func target(of fd: Int32) -> String {
    var buffer = [CChar](repeating: 0, count: 4096)
    let count = readlink("/proc/self/fd/\(fd)", &buffer, buffer.count - 1)
    check(count > 0, "readlink of fd \(fd) failed")
    return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

func checkInside(_ entry: OpenedEntry, _ what: String) {
    let place = target(of: entry.fd)
    check(place == tree.rootReal || place.hasPrefix(tree.rootReal + "/"), "\(what) resolved outside: \(place)")
    check(entry.facts.inode != tree.secretInode, "\(what) opened outside/secret")
    check(entry.facts.kind == .regular || entry.facts.kind == .directory, "\(what) opened a \(entry.facts.kind)")
}

/// Decoding once without the parser's rules: nil for a bad escape.
func referenceSegments(_ path: [UInt8]) -> [[UInt8]]? {
    var segments: [[UInt8]] = [], current: [UInt8] = []
    var i = 1
    while i < path.count {
        if path[i] == UInt8(ascii: "/") { segments.append(current); current = []; i += 1; continue }
        if path[i] == UInt8(ascii: "%") {
            guard i + 2 < path.count, let value = UInt8(String(decoding: path[(i + 1)...(i + 2)], as: UTF8.self), radix: 16),
                  path[i + 1] != UInt8(ascii: "+"), path[i + 1] != UInt8(ascii: "-") else { return nil }
            current.append(value)
            i += 3
        } else {
            current.append(path[i])
            i += 1
        }
    }
    if !current.isEmpty { segments.append(current) }
    return segments
}

/// RequestTarget on the same bytes as a whole target: an origin-form target is itself; an
/// accepted one starts with "/" and its path has no "?"; an absolute-form one ends in the
/// target it came from (nothing invented but a leading "/"); RequestPath(target:) refuses
/// or accepts exactly as RequestPath(path:) on that path.
func checkTarget(_ target: String) {
    guard let origin = RequestTarget.originForm(target) else {
        check(RequestTarget.path(target) == nil, "a path without an origin form")
        check((try? RequestPath(target: target)) == nil, "RequestPath took a target in no form")
        return
    }
    check(origin.utf8.first == UInt8(ascii: "/"), "an origin form without its slash")
    if target.utf8.first == UInt8(ascii: "/") { check(origin.utf8.elementsEqual(target.utf8), "an origin-form target changed") }
    else {
        // Bytes, not Characters: a cut may fall inside a grapheme cluster ("?" + a combining mark).
        let whole = Array(target.utf8), tail = Array(origin.utf8)
        func endsWith(_ bytes: ArraySlice<UInt8>) -> Bool { whole.count >= bytes.count && whole.suffix(bytes.count) == bytes }
        check(tail == [UInt8(ascii: "/")] || endsWith(tail[...]) || (tail.starts(with: "/?".utf8) && endsWith(tail.dropFirst())),
              "an absolute form's path is not from its target")
    }
    guard let path = RequestTarget.path(target) else { return check(false, "an origin form without a path") }
    check(!path.utf8.contains(UInt8(ascii: "?")), "a path with its query")
    check((try? RequestPath(target: target)) == (try? RequestPath(path: Array(path.utf8))), "target and path parse apart")
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPath(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size >= 1 else { return 0 }
    _ = removeTree
    var path = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    checkTarget(String(decoding: path, as: UTF8.self))
    if let query = path.firstIndex(of: UInt8(ascii: "?")) { path.removeSubrange(query...) }
    let resolver = resolvers[Int(data[0] & 1)]

    let parsed: RequestPath
    do { parsed = try RequestPath(path: path) } catch {
        check(!error.description.utf8.contains { $0 < 0x20 }, "a refusal's line has a control byte")
        return 0
    }
    for segment in parsed.segments {
        check(!segment.isEmpty, "an empty segment")
        check(segment != [0x2E] && segment != [0x2E, 0x2E], "a dot segment")
        check(segment.first != 0x2E, "a dotfile segment")
        check(!segment.contains { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "\\") || $0 < 0x20 || $0 == 0x7F },
              "a separator or control byte in \(segment)")
    }
    check(parsed.hasTrailingSlash == (path.last == UInt8(ascii: "/")), "trailing slash")
    check(referenceSegments(path) == parsed.segments, "segments differ from one decoding")
    var encoded: [UInt8] = []
    for segment in parsed.segments {
        encoded.append(UInt8(ascii: "/"))
        for byte in segment { encoded += Array("%\(String(byte, radix: 16, uppercase: true).count == 1 ? "0" : "")\(String(byte, radix: 16, uppercase: true))".utf8) }
    }
    if parsed.hasTrailingSlash { encoded.append(UInt8(ascii: "/")) }
    let again = try? RequestPath(path: encoded)
    check(again == parsed, "percent-encoding every byte parses differently")

    let symlinkOnPath: Bool = {
        let names = parsed.segments.map { String(decoding: $0, as: UTF8.self) }
        return names.contains { ["out", "up", "in", "loop"].contains($0) }
    }()
    do {
        let found = try resolver.program(for: parsed)
        checkInside(found.entry, "program")
        check(found.entry.facts.kind == .regular, "a program that is no regular file")
        check(found.programSegments >= 1 && found.programSegments <= parsed.segments.count, "program segments")
        let names = parsed.segments.prefix(found.programSegments).map { String(decoding: $0, as: UTF8.self) }
        check(!names.contains { ["out", "up", "in", "loop"].contains($0) }, "a program found through a symlink")
    } catch {}
    do {
        let entry = try resolver.open(segments: parsed.segments)
        checkInside(entry, "open")
        check(!symlinkOnPath, "a file opened through a symlink")
    } catch {}
    return 0
}
