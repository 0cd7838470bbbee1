module github.com/trawl-crawler/trawl/services/seeder

go 1.26.8

replace github.com/trawl-crawler/trawl/libs => ../../libs
