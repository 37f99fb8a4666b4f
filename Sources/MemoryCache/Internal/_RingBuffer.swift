/// A FIFO queue over a power-of-two ring; amortised O(1) `append` and `popFirst`.
@usableFromInline
struct _RingBuffer<Element> {
    @usableFromInline var storage: ContiguousArray<Element?> = []
    @usableFromInline var head = 0
    @usableFromInline var count = 0

    @inlinable init() {}

    @inlinable var isEmpty: Bool { count == 0 }

    @inlinable
    mutating func append(_ element: Element) {
        if count == storage.count { grow() }
        storage[(head &+ count) & (storage.count &- 1)] = element
        count += 1
    }

    @inlinable
    mutating func popFirst() -> Element? {
        guard count > 0 else { return nil }
        let element = storage[head]
        storage[head] = nil
        head = (head &+ 1) & (storage.count &- 1)
        count -= 1
        return element
    }

    @inlinable
    mutating func removeAll() {
        storage = []
        head = 0
        count = 0
    }

    @inlinable
    mutating func grow() {
        let oldCapacity = storage.count
        var grown = ContiguousArray<Element?>(repeating: nil, count: Swift.max(16, oldCapacity * 2))
        for offset in 0..<count {
            grown[offset] = storage[(head + offset) & (oldCapacity - 1)]
        }
        storage = grown
        head = 0
    }
}

extension _RingBuffer: Sendable where Element: Sendable {}
