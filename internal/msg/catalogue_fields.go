package msg

// fieldEntries say why one field of a request was refused (problem details' errors[]).
var fieldEntries = map[string]entry{}
