package msg

// cliEntries are the words of the command-line client, tc.
var cliEntries = map[string]entry{}
