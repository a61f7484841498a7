import TestSupport
import XCTest

/// The pairwise generator (TestSupport's PairwiseMatrix) and the two matrices' cases: every
/// pair of values that the checked-in list (MatrixDimensions) does not exclude is in a case,
/// no case holds an excluded pair, and the cases are the same on every run. No peers needed.
final class MatrixCoverageTests: XCTestCase {
    func testEveryAllowedPairOfTheClientMatrixIsCovered() {
        assertSound(MatrixDimensions.client, "client")
    }

    func testEveryAllowedPairOfTheServerMatrixIsCovered() {
        assertSound(MatrixDimensions.server, "server")
    }

    func testTheGeneratorCoversEveryPairAndKeepsExcludedOnesOut() {
        let matrix = PairwiseMatrix([
            PairwiseParameter("a", ["1", "2", "3"]), PairwiseParameter("b", ["1", "2", "3"]),
            PairwiseParameter("c", ["1", "2"]), PairwiseParameter("d", ["1", "2", "3", "4"]),
        ], excluding: [PairwiseExclusion(.init("a", "1"), .init("d", "4"), "test")])
        let (cases, unreachable) = matrix.generate()
        XCTAssertEqual(unreachable, [])
        XCTAssertEqual(matrix.requiredPairs.count, 9 + 6 + 12 - 1 + 6 + 12 + 8)
        let (missing, excluded) = matrix.check(cases)
        XCTAssertEqual(missing, [])
        XCTAssertEqual(excluded, [])
        // All pairs of the two largest parameters need 12 cases; greedy stays near that.
        XCTAssertGreaterThanOrEqual(cases.count, 12)
        XCTAssertLessThanOrEqual(cases.count, 15)
        // check() itself sees a missing pair and an excluded one.
        let fewer = Array(cases.dropLast())
        XCTAssertFalse(matrix.check(fewer).missing.isEmpty)
        let bad = PairwiseCase(number: 99, values: [.init("a", "1"), .init("b", "1"), .init("c", "1"), .init("d", "4")])
        XCTAssertEqual(matrix.check(cases + [bad]).excludedPresent, ["99: a=1 x d=4"])
    }

    func testAPairOtherExclusionsMakeImpossibleIsReportedNotDropped() {
        // b=1 cannot meet c=1 or c=2: the pair a=1 x b=1 has no allowed value of c.
        let matrix = PairwiseMatrix([
            PairwiseParameter("a", ["1", "2"]), PairwiseParameter("b", ["1", "2"]), PairwiseParameter("c", ["1", "2"]),
        ], excluding: [PairwiseExclusion(.init("b", "1"), .init("c", "1"), "x"), PairwiseExclusion(.init("b", "1"), .init("c", "2"), "y")])
        XCTAssertEqual(matrix.generate().unreachable, ["a=1 x b=1", "a=2 x b=1"])
    }

    func testAThreeValueExclusionKeepsOnlyTheThreeTogetherOut() {
        // a=1 x b=1 must still be covered, with c=2; a=1 x b=1 x c=1 never appears.
        let triple = PairwiseExclusion(.init("a", "1"), .init("b", "1"), when: .init("c", "1"), "z")
        let matrix = PairwiseMatrix([
            PairwiseParameter("a", ["1", "2"]), PairwiseParameter("b", ["1", "2"]), PairwiseParameter("c", ["1", "2"]),
        ], excluding: [triple])
        XCTAssertEqual(matrix.requiredPairs.count, 12)
        let (cases, unreachable) = matrix.generate()
        XCTAssertEqual(unreachable, [])
        XCTAssertFalse(cases.contains { triple.isMet(by: $0.values) })
        XCTAssertEqual(matrix.check(cases).missing, [])
        let bad = PairwiseCase(number: 99, values: [.init("a", "1"), .init("b", "1"), .init("c", "1")])
        XCTAssertEqual(matrix.check(cases + [bad]).excludedPresent, ["99: a=1 x b=1 x c=1"])
        // When every value of c completes one, the pair is unreachable (to be excluded itself).
        let both = PairwiseMatrix(matrix.parameters, excluding: [triple, PairwiseExclusion(.init("a", "1"), .init("b", "1"), when: .init("c", "2"), "z")])
        XCTAssertEqual(both.generate().unreachable, ["a=1 x b=1"])
    }

    private func assertSound(_ matrix: PairwiseMatrix, _ name: String, file: StaticString = #filePath, line: UInt = #line) {
        let (cases, unreachable) = matrix.generate()
        XCTAssertEqual(unreachable, [], "pairs no case can hold: exclude them in MatrixDimensions with a reason", file: file, line: line)
        let (missing, excluded) = matrix.check(cases)
        XCTAssertEqual(missing, [], file: file, line: line)
        XCTAssertEqual(excluded, [], file: file, line: line)
        XCTAssertEqual(cases.map(\.description), matrix.generate().cases.map(\.description), "deterministic", file: file, line: line)
        let largest = matrix.parameters.map(\.values.count).sorted(by: >)
        XCTAssertGreaterThanOrEqual(cases.count, largest[0] * largest[1] - matrix.exclusions.count, file: file, line: line)
        print("matrix: \(name) \(cases.count) cases covering \(matrix.requiredPairs.count) pairs "
              + "(\(matrix.exclusions.count) excluded: \(matrix.exclusions.map(\.description).joined(separator: "; ")))")
    }
}
