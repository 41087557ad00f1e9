module benchmod

go 1.22
