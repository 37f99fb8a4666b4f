// HTTPCache's API speaks swift-http-types (`StoredResponse.headers` and `CacheRequest.headers`
// are `HTTPFields`, field names `HTTPField.Name`): the module is re-exported, as Hummingbird
// does, so that `import HTTPCache` alone reads and edits them (in a `willStore` hook, for one)
// without naming swift-http-types as a dependency.
@_exported public import HTTPTypes
