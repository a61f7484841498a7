// libFuzzer target: the MATCH expressions of --expect/--until (Sources/WSPipeBridge/
// Conversation/*.swift and JSON.swift compiled in, CWSPipeShims' regex calls from shims.o).
//
// Input: byte 0 picks the form (bit 0: 0 PATH=VALUE, 1 a regular expression); the rest is the
// spec, then a 0xFF byte, then the payload (made valid UTF-8, as a text message is).
//
// (Prefixes are compared as bytes: a spec may start with a combining mark.)
// Checks, PATH=VALUE:
//   - the parser never crashes; a refusal is one line naming --expect-json and the spec
//   - an accepted spec's path, written back with every key quoted, and its value written as
//     JSON, parse to the same steps and an equal value; a value equals itself
//   - when the payload is JSON with something at the path, PATH=<that, written as JSON>
//     matches the payload (exact numbers, members in any order)
//   - equal numbers are the same Double; a JSONNumber's digits are canonical
// Regular expressions:
//   - a refusal is one line naming --expect; an accepted pattern's one-pass search
//     (^(.|[^.])*(REGEX)) agrees with glibc's plain regexec, which tries every start position
import CWSPipeShims

func writeJSON(_ value: JSONValue, to out: inout [UInt8]) {
    switch value {
    case .null: out += Array("null".utf8)
    case .bool(let flag): out += Array((flag ? "true" : "false").utf8)
    case .number(let number): out += Array(number.text.utf8)
    case .string(let text): Array(text.utf8).withUnsafeBytes { JSONWriter.appendString($0, to: &out) }
    case .array(let elements):
        out.append(UInt8(ascii: "["))
        for (offset, element) in elements.enumerated() {
            if offset > 0 { out.append(UInt8(ascii: ",")) }
            writeJSON(element, to: &out)
        }
        out.append(UInt8(ascii: "]"))
    case .object(let members):
        out.append(UInt8(ascii: "{"))
        // Written in reverse: order must not count (a repeated name's last value still wins,
        // so only the distinct last ones are written).
        var seen: [[UInt8]] = []
        for (name, member) in members.reversed() where !seen.contains(Array(name.utf8)) {
            seen.append(Array(name.utf8))
            if seen.count > 1 { out.append(UInt8(ascii: ",")) }
            Array(name.utf8).withUnsafeBytes { JSONWriter.appendString($0, to: &out) }
            out.append(UInt8(ascii: ":"))
            writeJSON(member, to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }
}

/// A path with every key quoted.
func writePath(_ steps: [JSONFieldPattern.Step]) -> [UInt8] {
    var out: [UInt8] = []
    for (offset, step) in steps.enumerated() {
        switch step {
        case .key(let name):
            if offset > 0 { out.append(UInt8(ascii: ".")) }
            out.append(UInt8(ascii: "\""))
            for byte in name.utf8 {
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { out.append(UInt8(ascii: "\\")) }
                out.append(byte)
            }
            out.append(UInt8(ascii: "\""))
        case .index(let index):
            out += Array("[\(index)]".utf8)
        }
    }
    return out
}

func resolve(_ value: JSONValue, _ steps: [JSONFieldPattern.Step]) -> JSONValue? {
    var field = value
    for step in steps {
        switch step {
        case .key(let name): guard let next = field[name] else { return nil }; field = next
        case .index(let index): guard let next = field[index] else { return nil }; field = next
        }
    }
    return field
}

func checkNumbers(_ a: JSONValue, _ b: JSONValue) {
    guard case .number(let x) = a, case .number(let y) = b else { return }
    for number in [x, y] where !number.outOfRange {
        check(number.digits.first != 0x30 && number.digits.last != 0x30, "digits not canonical: \(number.text)")
        check(number.digits.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }, "a digit that is none: \(number.text)")
    }
    if x == y { check(x.doubleValue == y.doubleValue || x.doubleValue.isNaN, "\(x.text) == \(y.text) but not as Doubles") }
}

/// The pattern made, or nil after checking its refusal: one line naming the option.
func accepted(_ option: String, _ make: () throws(MessagePatternError) -> MessagePattern) -> MessagePattern? {
    do { return try make() } catch {
        check(error.description.utf8.starts(with: "\(option) '".utf8), "a refusal without the option: \(error)")
        check(!error.fault.contains("\n") && !error.fault.isEmpty, "a fault that is not one line")
        return nil
    }
}

func fuzzJSON(_ spec: String, _ payload: [UInt8]) {
    guard let pattern = accepted("--expect-json", { () throws(MessagePatternError) in try .jsonField(spec) }) else { return }
    let field = try! JSONFieldPattern(spec)
    check(field.value == field.value, "a value unequal to itself")
    var again = writePath(field.path) + [UInt8(ascii: "=")]
    writeJSON(field.value, to: &again)
    let reparsed = try! JSONFieldPattern(String(decoding: again, as: UTF8.self))
    check(reparsed.path == field.path, "the path written back parses differently: \(String(decoding: again, as: UTF8.self))")
    check(reparsed.value == field.value, "the value written back is another: \(String(decoding: again, as: UTF8.self))")

    let matched = pattern.matches(text: payload)
    guard let message = payload.withUnsafeBytes({ try? JSONParser.parse($0) }) else {
        return check(!matched, "a payload that is not JSON matched")
    }
    guard let found = resolve(message, field.path) else { return check(!matched, "matched with nothing at the path") }
    check(matched == (found == field.value), "matches says \(matched), the field compares \(found == field.value)")
    checkNumbers(found, field.value)
    var exact = writePath(field.path) + [UInt8(ascii: "=")]
    writeJSON(found, to: &exact)
    check(try! MessagePattern.jsonField(String(decoding: exact, as: UTF8.self)).matches(text: payload),
          "the field written back does not match: \(String(decoding: exact, as: UTF8.self))")
}

func fuzzRegex(_ spec: String, _ payload: [UInt8]) {
    guard let pattern = accepted("--expect", { () throws(MessagePatternError) in try .regex(spec) }) else { return }
    guard let plain = try? CompiledRegex(spec) else { checkFailed("accepted, but glibc refuses it alone") }
    // A NUL after the payload, outside the range given: ASan's regexec interceptor checks
    // strlen(string) + 1 bytes, not knowing REG_STARTEND (glibc reads only the range).
    let terminated = payload + [0]
    terminated.withUnsafeBytes { whole in
        let text = UnsafeRawBufferPointer(rebasing: whole[..<payload.count])
        let oneByOne = plain.matches(text)
        check(pattern.matches(text: text) == oneByOne, "the one-pass search says \(!oneByOne), plain regexec \(oneByOne)")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMatch(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size >= 1 else { return 0 }
    let rest = UnsafeBufferPointer(start: data + 1, count: size - 1)
    let split = rest.firstIndex(of: 0xFF) ?? rest.count
    let spec = String(decoding: rest[..<split], as: UTF8.self)
    let payload = split < rest.count ? Array(String(decoding: rest[(split + 1)...], as: UTF8.self).utf8) : []
    if data[0] & 1 == 0 { fuzzJSON(spec, payload) } else { fuzzRegex(spec, payload) }
    return 0
}
