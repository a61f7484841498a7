/// One key press (or one bracketed paste) read from a terminal in raw mode.
package enum ConsoleKey: Equatable, Sendable {
    /// A run of printable characters (never a C0 or C1 control; invalid UTF-8 as U+FFFD).
    case text(String)
    /// CR or LF (CR LF counts once).
    case enter
    /// DEL (0x7F) or Ctrl-H (0x08).
    case backspace
    /// `ESC [ 3 ~`.
    case delete
    case left, right, home, end, up, down, tab
    /// Alt-B and Alt-F (`ESC b`, `ESC f`), Ctrl- or Alt-Left and -Right: a word back, forward.
    case wordLeft, wordRight
    /// A lone ESC (`flushPendingEscape`), or an ESC before a byte that starts no sequence
    /// (Alt-x sends ESC x: `.escape` then `.text("x")`).
    case escape
    /// A C0 control not named above: Ctrl-A...Ctrl-Z as 1...26 (Ctrl-C = 3), also 0 and 28...31.
    case control(UInt8)
    /// A bracketed paste (`ESC [ 200 ~` ... `ESC [ 201 ~`) split at CR LF, CR and LF. A paste
    /// that ends with a line break has "" as its last element; the elements keep any other
    /// control characters as pasted.
    case paste([String])
    /// A C1 control or an escape sequence for a key the console has no use for (F1, Insert,
    /// Page Up, a modified key we do not know, a malformed or overlong sequence).
    case unknown
}

extension ConsoleKey {
    /// `keys` with adjacent text runs made one: what the decoder gives for the same bytes
    /// however reads cut them (a read boundary ends a run).
    package static func joiningText(_ keys: [ConsoleKey]) -> [ConsoleKey] {
        var out: [ConsoleKey] = []
        for key in keys {
            if case .text(let more) = key, case .text(let text)? = out.last {
                out[out.count - 1] = .text(text + more)
            } else {
                out.append(key)
            }
        }
        return out
    }
}

/// Turns the bytes a terminal sends into keys, whatever the reads' boundaries: an escape
/// sequence or a UTF-8 character cut by a read waits for the rest. A lone ESC is ambiguous
/// (the Esc key, or the start of a sequence whose rest is late): it waits until the face
/// calls `flushPendingEscape` after a short idle time. What it holds is bounded: a pending
/// sequence by `maximumSequence` bytes, a paste by `pasteLimit` bytes (the rest is dropped).
package struct ConsoleKeyDecoder: Sendable {
    package static let defaultPasteLimit = 1 << 20
    /// Longest CSI sequence kept waiting for its final byte; longer is `.unknown`.
    static let maximumSequence = 32
    private static let pasteEnd: [UInt8] = [0x1B, 0x5B, 0x32, 0x30, 0x31, 0x7E]  // ESC [ 2 0 1 ~

    package let pasteLimit: Int
    /// Bytes not decoded yet: an incomplete escape sequence or UTF-8 character, or in a paste
    /// the bytes that may start its end marker.
    private var pending: [UInt8] = []
    private var pasting = false
    private var pasted: [UInt8] = []
    /// The last byte decoded was a CR: a LF right after it is the same Enter.
    private var afterCR = false

    package init(pasteLimit: Int = ConsoleKeyDecoder.defaultPasteLimit) {
        self.pasteLimit = max(0, pasteLimit)
    }

    /// Whether a lone ESC (or an unfinished sequence) is waiting: the face then calls
    /// `flushPendingEscape` when no byte has come for a short while.
    package var hasPendingEscape: Bool { !pasting && pending.first == 0x1B }

    /// Whether a bracketed paste has begun and not ended.
    package var isPasting: Bool { pasting }

    package mutating func feed(_ bytes: some Collection<UInt8>) -> [ConsoleKey] {
        pending.append(contentsOf: bytes)
        var keys: [ConsoleKey] = []
        let used = decode(into: &keys)
        pending.removeFirst(used)
        return keys
    }

    /// The Esc key after an idle time: a waiting ESC becomes `.escape` and the bytes after
    /// it (an unfinished sequence) are decoded as typed.
    package mutating func flushPendingEscape() -> [ConsoleKey] {
        var keys: [ConsoleKey] = []
        while hasPendingEscape {
            pending.removeFirst()
            keys.append(.escape)
            afterCR = false
            let used = decode(into: &keys)
            pending.removeFirst(used)
        }
        return keys
    }

    /// Decodes `pending` from its start; returns how many bytes were used (the rest waits).
    private mutating func decode(into keys: inout [ConsoleKey]) -> Int {
        var text = ""
        func flushText() {
            if !text.isEmpty { keys.append(.text(text)); text = "" }
        }
        var index = 0
        while index < pending.count {
            if pasting {
                flushText()
                index = consumePaste(from: index, into: &keys)
                if pasting { break }  // waiting for the rest of the paste
                continue
            }
            let byte = pending[index]
            let wasCR = afterCR
            afterCR = false
            switch byte {
            case 0x1B:
                guard let (key, length) = escapeSequence(at: index) else { flushText(); return index }
                flushText()
                if key == .paste([]) { pasting = true; pasted = [] } else if let key { keys.append(key) }
                index += length
            case 0x0D, 0x0A:
                flushText()
                if byte == 0x0D || !wasCR { keys.append(.enter) }
                afterCR = byte == 0x0D
                index += 1
            case 0x09: flushText(); keys.append(.tab); index += 1
            case 0x08, 0x7F: flushText(); keys.append(.backspace); index += 1
            case 0..<0x20: flushText(); keys.append(.control(byte)); index += 1
            case 0x20..<0x7F: text.unicodeScalars.append(Unicode.Scalar(byte)); index += 1
            default:
                switch Self.utf8Scalar(pending, at: index) {
                case .incomplete: flushText(); return index
                case .invalid(let length):
                    text.unicodeScalars.append("\u{FFFD}")
                    index += length
                case .scalar(let scalar, let length):
                    if scalar.value < 0xA0 { flushText(); keys.append(.unknown) } else { text.unicodeScalars.append(scalar) }
                    index += length
                }
            }
        }
        flushText()
        return index
    }

    /// The key of the escape sequence at `index` and its length in bytes; nil when it may
    /// still be incomplete. A nil key: a sequence that means nothing here (a stray paste
    /// end). `.paste([])` stands for the paste start.
    private func escapeSequence(at index: Int) -> (ConsoleKey?, Int)? {
        guard index + 1 < pending.count else { return nil }
        switch pending[index + 1] {
        case 0x5B:  // CSI: ESC [ parameters intermediates final
            var end = index + 2
            while end < pending.count {
                let byte = pending[end]
                if end - index >= Self.maximumSequence { return (.unknown, end - index) }
                switch byte {
                case 0x20...0x3F: end += 1
                case 0x40...0x7E: return (Self.csiKey(pending[(index + 2)..<end], final: byte), end - index + 1)
                default: return (.unknown, end - index)  // malformed: the byte starts afresh
                }
            }
            return nil
        case 0x4F:  // SS3: ESC O final (what keypads in application mode send)
            guard index + 2 < pending.count else { return nil }
            let final = pending[index + 2]
            guard (0x40...0x7E).contains(final) else { return (.escape, 1) }
            let keys: [UInt8: ConsoleKey] = [0x41: .up, 0x42: .down, 0x43: .right, 0x44: .left, 0x48: .home, 0x46: .end, 0x4D: .enter]
            return (keys[final] ?? .unknown, 3)
        case 0x62: return (.wordLeft, 2)  // Alt-B
        case 0x66: return (.wordRight, 2)  // Alt-F
        default:
            return (.escape, 1)
        }
    }

    private static func csiKey(_ parameters: ArraySlice<UInt8>, final: UInt8) -> ConsoleKey? {
        // The first parameter (a modifier may follow after ";": Ctrl-Left is ESC [ 1 ; 5 D).
        let first = parameters.prefix { $0 != 0x3B }
        guard first.allSatisfy({ (0x30...0x39).contains($0) }), first.count <= 4,
              parameters.allSatisfy({ (0x30...0x3B).contains($0) }) else { return .unknown }
        let number = first.reduce(0) { $0 * 10 + Int($1 - 0x30) }
        // Ctrl (5) or Alt (3) with Left or Right moves by word, as readline does.
        let modifier = parameters.split(separator: 0x3B).dropFirst().first.map { Array($0) }
        if modifier == [0x35] || modifier == [0x33] {
            if final == 0x43 { return .wordRight }
            if final == 0x44 { return .wordLeft }
        }
        switch final {
        case 0x41: return .up
        case 0x42: return .down
        case 0x43: return .right
        case 0x44: return .left
        case 0x48: return .home
        case 0x46: return .end
        case 0x7E:
            switch number {
            case 1, 7: return .home
            case 4, 8: return .end
            case 3: return .delete
            case 200: return .paste([])
            case 201: return nil
            default: return .unknown
            }
        default: return .unknown
        }
    }

    /// Takes paste bytes from `index` up to the end marker (then emits the paste) or up to
    /// what may be the start of the marker; returns the index after what it took.
    private mutating func consumePaste(from index: Int, into keys: inout [ConsoleKey]) -> Int {
        let marker = Self.pasteEnd
        var scan = index
        while scan < pending.count {
            if pending[scan] == 0x1B {
                let available = min(marker.count, pending.count - scan)
                if pending[scan..<(scan + available)].elementsEqual(marker[..<available]) {
                    guard available == marker.count else { break }  // the marker may be cut
                    keep(pending[index..<scan])
                    keys.append(.paste(Self.lines(pasted)))
                    pasting = false
                    pasted = []
                    return scan + marker.count
                }
            }
            scan += 1
        }
        keep(pending[index..<scan])
        return scan
    }

    private mutating func keep(_ bytes: ArraySlice<UInt8>) {
        let room = pasteLimit - pasted.count
        if room > 0 { pasted.append(contentsOf: bytes.prefix(room)) }
    }

    private static func lines(_ bytes: [UInt8]) -> [String] {
        let text = String(decoding: bytes, as: UTF8.self)
        return text.split(omittingEmptySubsequences: false) { $0 == "\n" || $0 == "\r\n" || $0 == "\r" }.map(String.init)
    }

    private enum UTF8Step { case scalar(Unicode.Scalar, Int), invalid(Int), incomplete }

    /// The scalar whose lead byte is at `index` (not ASCII); `invalid(n)`: the maximal
    /// subpart of n bytes becomes one U+FFFD, as Swift's and browsers' decoders do.
    private static func utf8Scalar(_ bytes: [UInt8], at index: Int) -> UTF8Step {
        let lead = bytes[index]
        let length: Int
        var second: ClosedRange<UInt8> = 0x80...0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; second = 0xA0...0xBF
        case 0xED: length = 3; second = 0x80...0x9F
        case 0xE1...0xEF: length = 3
        case 0xF0: length = 4; second = 0x90...0xBF
        case 0xF4: length = 4; second = 0x80...0x8F
        case 0xF1...0xF3: length = 4
        default: return .invalid(1)
        }
        var value = UInt32(lead) & (0xFF >> (length + 1))
        for offset in 1..<length {
            guard index + offset < bytes.count else { return .incomplete }
            let byte = bytes[index + offset]
            guard (offset == 1 ? second : 0x80...0xBF).contains(byte) else { return .invalid(offset) }
            value = value << 6 | UInt32(byte & 0x3F)
        }
        guard let scalar = Unicode.Scalar(value) else { return .invalid(length) }
        return .scalar(scalar, length)
    }
}
