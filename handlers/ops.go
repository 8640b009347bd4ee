package handlers

import (
	"bytes"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/middleware"
	"github.com/shop/shop/problem"
)

func (s *Server) healthz(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) }

// readyz answers 200 once the database answers and the schema is in place.
func (s *Server) readyz(c *gin.Context) {
	db := s.deps.DB.WithContext(c.Request.Context())
	if sqlDB, err := db.DB(); err != nil || sqlDB.PingContext(c.Request.Context()) != nil {
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "database unreachable"})
		return
	}
	if !db.Migrator().HasTable(&middleware.IdempotencyKey{}) {
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "migrations not applied"})
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "ready"})
}

// problemIndex documents the idempotency policy and every problem type.
func (s *Server) problemIndex(c *gin.Context) { s.page(c, nil) }

func (s *Server) problemPage(c *gin.Context) {
	for _, t := range problem.All {
		if t.Slug == c.Param("slug") {
			s.page(c, &t)
			return
		}
	}
	problem.Write(c, problem.NotFound.With("No such problem type."))
}

func (s *Server) page(c *gin.Context, t *problem.Type) {
	var buf bytes.Buffer
	data := gin.H{"Type": t, "All": problem.All, "TTL": s.deps.TTL, "Lease": s.deps.Lease, "Wait": s.deps.Wait}
	if err := s.docs.Execute(&buf, data); err != nil {
		s.fail(c, err)
		return
	}
	c.Data(http.StatusOK, "text/html; charset=utf-8", buf.Bytes())
}
