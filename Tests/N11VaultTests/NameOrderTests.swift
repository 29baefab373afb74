import Foundation
import Testing
@testable import N11Format

/// The listings' name order: the short way for names that differ only in their numbers must
/// give what Foundation's localized numeric compare gives, or a sort would mix two orders.
@Suite("NameOrder")
struct NameOrderTests {
    private static let options: String.CompareOptions = [.caseInsensitive, .numeric, .widthInsensitive, .forcedOrdering]

    private static func foundation(_ a: String, _ b: String, _ locale: Locale) -> ComparisonResult {
        a == b ? .orderedSame : a.compare(b, options: options, range: nil, locale: locale)
    }

    @Test("names that differ only in digits: the short way agrees with Foundation, thousands of random pairs", arguments: ["en_US", "de_DE", "sv_SE", "ja_JP"])
    func sameShapeAgrees(localeID: String) {
        let locale = Locale(identifier: localeID)
        let letters = Array("abcXYZ_ -.()[]#éü")   // a non-ASCII one takes the long way
        var generator = SystemRandomNumberGenerator()
        var shortWays = 0
        for _ in 0..<5000 {
            // One shape: letters at fixed places, digits at the others; two fillings of the digits.
            let length = Int.random(in: 1...16, using: &generator)
            let digitAt = (0..<length).map { _ in Bool.random(using: &generator) }
            let template = (0..<length).map { _ in letters.randomElement(using: &generator)! }
            func filled() -> String {
                String((0..<length).map { digitAt[$0] ? Character(String(Int.random(in: 0...9, using: &generator))) : template[$0] })
            }
            let a = filled(), b = filled()
            if NameOrder.sameShapeOrder(a, b) != nil { shortWays += 1 }
            #expect(NameOrder(locale: locale).compare(a, b) == Self.foundation(a, b, locale), "\(a) against \(b)")
        }
        #expect(shortWays > 1000, "the short way was taken: \(shortWays)")
    }

    @Test("the short way only for ASCII names of one length that differ where both have digits")
    func shortWayOnlyWhereItHolds() {
        #expect(NameOrder.sameShapeOrder("IMG_0041.JPG", "IMG_0112.JPG") == .orderedAscending)
        #expect(NameOrder.sameShapeOrder("note 9.txt", "note 8.txt") == .orderedDescending)
        #expect(NameOrder.sameShapeOrder("DSC 2", "DSC 10") == nil, "lengths differ: 2 before 10 needs the numeric compare")
        #expect(NameOrder.sameShapeOrder("img_1.jpg", "IMG_1.jpg") == nil, "differ in a letter")
        #expect(NameOrder.sameShapeOrder("é1", "é2") == nil, "not ASCII")
        #expect(NameOrder.sameShapeOrder("a1", "a1") == nil, "equal")
        // And the whole order: file-manager order, the same with or without the short way.
        let names = ["DSC 10.txt", "DSC 2.txt", "dsc 3.txt", "éclair.txt", "eclair.txt", "IMG_0112.JPG", "IMG_0041.JPG", "img_0050.jpg"]
        let locale = Locale(identifier: "en_US")
        let order = NameOrder(locale: locale)
        let sorted = names.sorted { order.compare($0, $1) == .orderedAscending }
        #expect(sorted == names.sorted { Self.foundation($0, $1, locale) == .orderedAscending })
        #expect(sorted.firstIndex(of: "DSC 2.txt")! < sorted.firstIndex(of: "DSC 10.txt")!)
        #expect(sorted.firstIndex(of: "IMG_0041.JPG")! < sorted.firstIndex(of: "img_0050.jpg")!)
    }
}
