import HTTPTypes
import Testing
@testable import HTTPCache

extension PolicyEngineTests {
    struct CacheControlParsing {
        typealias Directive = CacheControl.Directive

        @Test func tokensAndQuotedArgumentsAreParsedInOrder() {
            let value = CacheControl("max-age=60, Public, no-cache=\"Set-Cookie, X-Foo\", s-maxage=\"120\", x-ext=\"a\\\"b\"")
            #expect(value.directives == [
                Directive(name: "max-age", argument: "60"),
                Directive(name: "public"),
                Directive(name: "no-cache", argument: "Set-Cookie, X-Foo"),
                Directive(name: "s-maxage", argument: "120"),
                Directive(name: "x-ext", argument: "a\"b"),
            ])
            #expect(value.noCacheFieldNames == ["Set-Cookie", "X-Foo"])
            #expect(value.sharedMaxAge == 120)
        }

        @Test func directiveNamesAreCaseInsensitive() {
            let value = CacheControl("MAX-AGE=5, No-Store")
            #expect(value.maxAge == 5)
            #expect(value.noStore)
        }

        @Test func quotedDeltaSecondsAreAccepted() {
            #expect(CacheControl("max-age=\"5\"").maxAge == 5)
        }

        @Test func theFirstOccurrenceOfADirectiveCounts() {
            #expect(CacheControl("max-age=10, max-age=20").maxAge == 10)
            let headers: HTTPFields = ["Cache-Control": "max-age=30", "cache-control": "max-age=5, public"]
            let value = CacheControl(headers)
            #expect(value.maxAge == 30)
            #expect(value.isPublic)
        }

        @Test(arguments: ["max-age=abc", "max-age=-1", "max-age", "max-age=1.5", "max-age=", "max-age=\"\""])
        func malformedDeltaSecondsAreInvalid(value: String) {
            let directives = CacheControl(value)
            #expect(directives.seconds("max-age") == .invalid)
            #expect(directives.maxAge == nil)
        }

        @Test func deltaSecondsBeyondTwoToTheThirtyFirstAreClamped() {
            #expect(CacheControl("max-age=99999999999999999999").maxAge == 2_147_483_648)
            #expect(CacheControl("max-age=2147483647").maxAge == 2_147_483_647)
        }

        @Test(arguments: [
            ("max-stale", CacheControl.MaxStale.any as CacheControl.MaxStale?),
            ("max-stale=30", .seconds(30)),
            ("max-stale=\"30\"", .seconds(30)),
            ("max-stale=soon", nil),
            ("max-age=5", nil),
        ])
        func maxStaleWithAndWithoutAValue(value: String, expected: CacheControl.MaxStale?) {
            #expect(CacheControl(value).maxStale == expected)
        }

        @Test func qualifiedAndUnqualifiedPrivateAreBothPrivate() {
            let qualified = CacheControl("private=\"Set-Cookie\"")
            #expect(qualified.isPrivate)
            #expect(qualified.privateFieldNames == ["Set-Cookie"])
            let unqualified = CacheControl("private")
            #expect(unqualified.isPrivate)
            #expect(unqualified.privateFieldNames == nil)
        }

        @Test func emptyElementsAndStrayWhitespaceAreSkipped() {
            let value = CacheControl(" , public,,  no-store ,")
            #expect(value.directives == [Directive(name: "public"), Directive(name: "no-store")])
        }

        @Test func requestAndExtensionDirectivesAreRead() {
            let value = CacheControl("min-fresh=10, only-if-cached, stale-if-error=300, stale-while-revalidate=30, immutable, must-understand")
            #expect(value.minFresh == 10)
            #expect(value.onlyIfCached)
            #expect(value.staleIfError == 300)
            #expect(value.staleWhileRevalidate == 30)
            #expect(value.isImmutable)
            #expect(value.mustUnderstand)
        }

        @Test func descriptionWritesDirectivesBackQuotingWhereNeeded() {
            let value = CacheControl("max-age=\"60\", no-cache=\"a, b\", public")
            #expect(value.description == "max-age=60, no-cache=\"a, b\", public")
            #expect(CacheControl(value.description) == value)
        }

        /// Found by fuzzing (FuzzCacheControl): a quote or backslash followed by a combining mark
        /// is one Character with it, and was written unescaped, ending the quoted string early.
        @Test(arguments: ["Int\"\u{031E}gS", "a\\\u{0301}b", "\"\u{20DD}", "é\"\\\"", "\u{0301}\"x"])
        func quotesAndBackslashesAreEscapedWhateverFollowsThem(_ argument: String) {
            let value = CacheControl(directives: [.init(name: "no-cache", argument: argument), .init(name: "public")])
            #expect(CacheControl(value.description) == value)
        }
    }
}
