package msg

// titleEntries are the titles the product gives the tasks it names itself (a user's own title
// stays their text).
var titleEntries = map[string]entry{}
