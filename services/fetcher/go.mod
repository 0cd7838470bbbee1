module github.com/trawl-crawler/trawl/services/fetcher

go 1.26.8

replace github.com/trawl-crawler/trawl/libs => ../../libs
